package snapshot

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/klauspost/compress/zstd"
)

// Create archives the workspace directory of sessionID as a new snapshot.
//
// It walks the workspace through os.Root without following symlinks,
// archiving regular files, directories and symlinks with their permission
// bits (setuid, setgid and sticky dropped) and modification times. It
// leaves out FIFOs, sockets and devices, and symlinks that are absolute or
// resolve outside the workspace; Snapshot.Skipped counts them. A workspace
// over the Store's Options is refused with berth.ETooLarge, and a missing
// one with berth.ENotFound. On any error, including ctx's, nothing is left
// in the store.
func (s *Store) Create(ctx context.Context, sessionID, workspace string) (*Snapshot, error) {
	if !validSessionID(sessionID) {
		return nil, berth.Errorf(berth.EInvalid, "invalid session id %q", sessionID)
	}
	fi, err := os.Stat(workspace)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, berth.Errorf(berth.ENotFound, "workspace does not exist")
	}
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot open workspace")
	}
	if !fi.IsDir() {
		return nil, berth.Errorf(berth.EInvalid, "workspace is not a directory")
	}
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot open workspace")
	}
	defer root.Close()

	snap := &Snapshot{ID: ids.New(idPrefix), SessionID: sessionID, CreatedAt: time.Now().UTC()}
	dir := s.sessionDir(sessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot create snapshot directory")
	}
	tmp, err := os.CreateTemp(dir, tempPrefix+"*"+archiveExt)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot create snapshot file")
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()

	zw, err := zstd.NewWriter(tmp)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot start compression")
	}
	w := &archiver{ctx: ctx, root: root, tw: tar.NewWriter(zw), opts: s.opts}
	err = w.walk(".")
	if err == nil {
		err = w.tw.Close()
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		var be *berth.Error
		if errors.As(err, &be) {
			return nil, err
		}
		return nil, berth.WrapError(berth.EInternal, err, "cannot archive workspace")
	}
	if err := tmp.Sync(); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot write snapshot")
	}
	st, err := tmp.Stat()
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot write snapshot")
	}
	if err := tmp.Close(); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot write snapshot")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	snap.SizeBytes, snap.Files, snap.Skipped = st.Size(), w.entries, w.skipped

	archive := s.archivePath(sessionID, snap.ID)
	if err := os.Rename(tmp.Name(), archive); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot write snapshot")
	}
	committed = true
	meta, _ := json.Marshal(snap)
	if err := writeFileAtomic(s.metaPath(sessionID, snap.ID), meta); err != nil {
		_ = os.Remove(archive)
		return nil, berth.WrapError(berth.EInternal, err, "cannot write snapshot metadata")
	}
	if err := syncDir(dir); err != nil {
		_ = os.Remove(s.metaPath(sessionID, snap.ID))
		_ = os.Remove(archive)
		return nil, berth.WrapError(berth.EInternal, err, "cannot write snapshot")
	}
	return snap, nil
}

// archiver writes a workspace into a tar stream.
type archiver struct {
	ctx     context.Context
	root    *os.Root
	tw      *tar.Writer
	opts    Options
	bytes   int64 // regular file bytes written so far
	entries int   // entries written so far
	skipped int   // entries left out
}

// walk archives the contents of the directory dir (relative to the root,
// "." for the root itself) in name order, depth first.
func (a *archiver) walk(dir string) error {
	d, err := a.root.Open(filepath.FromSlash(dir))
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	_ = d.Close()
	if err != nil {
		return err
	}
	slices.SortFunc(ents, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	for _, e := range ents {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		name := path.Join(dir, e.Name())
		fi, err := a.root.Lstat(filepath.FromSlash(name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return err
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			if err := a.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(mode.Perm()), ModTime: fi.ModTime()}); err != nil {
				return err
			}
			if err := a.walk(name); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			target, err := a.root.Readlink(filepath.FromSlash(name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			target = filepath.ToSlash(target)
			if lexicallyEscapes(name, target) || linkEscapes(a.root, name, target) {
				a.skipped++
				continue
			}
			if err := a.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: fi.ModTime()}); err != nil {
				return err
			}
		case mode.IsRegular():
			if err := a.file(name); err != nil {
				return err
			}
		default:
			a.skipped++
		}
	}
	return nil
}

// file archives the regular file name. It opens without blocking and
// checks the opened file, so a FIFO swapped in meanwhile cannot hang it.
func (a *archiver) file(name string) error {
	f, err := a.root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		a.skipped++
		return nil
	}
	size := fi.Size()
	if size > a.opts.MaxBytes-a.bytes {
		return berth.Errorf(berth.ETooLarge, "workspace is larger than the %d byte snapshot limit", a.opts.MaxBytes)
	}
	a.bytes += size
	if err := a.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	n, err := io.Copy(a.tw, io.LimitReader(ctxReader{a.ctx, f}, size))
	if err != nil {
		return err
	}
	if n < size {
		return berth.Errorf(berth.EConflict, "workspace file %q shrank while it was archived; try again", name)
	}
	return nil
}

// header counts an entry against the limits and writes its header in PAX
// format, which keeps long and non-ASCII names and sub-second times.
func (a *archiver) header(h *tar.Header) error {
	a.entries++
	if a.entries > a.opts.MaxEntries {
		return berth.Errorf(berth.ETooLarge, "workspace has more than the %d entry snapshot limit", a.opts.MaxEntries)
	}
	h.Format = tar.FormatPAX
	return a.tw.WriteHeader(h)
}

// ctxReader reads from r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

// Read implements io.Reader.
func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
