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
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/linkcheck"
	"github.com/klauspost/compress/zstd"
)

// Create archives the workspace directory of sessionID as a new snapshot.
//
// It walks the workspace through os.Root without following symlinks,
// archiving regular files, directories and symlinks with their permission
// bits (setuid, setgid and sticky dropped) and modification times. It
// leaves out FIFOs, sockets and devices, and symlinks that are absolute or
// resolve outside the workspace, and the paths hide names (the daemon's
// home, found by device and inode); Snapshot.Skipped counts them. A workspace
// over the Store's Options is refused with berth.ETooLarge, and a missing
// one with berth.ENotFound. On any error, including ctx's, nothing is left
// in the store.
func (s *Store) Create(ctx context.Context, sessionID, workspace string, hide ...string) (*Snapshot, error) {
	if !ids.ValidName(sessionID) {
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
	for _, p := range hide {
		if fi, err := os.Stat(p); err == nil {
			w.hide = append(w.hide, fi)
		}
	}
	err = w.walk(root, ".")
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
	if err := atomicfile.WriteFile(s.metaPath(sessionID, snap.ID), meta); err != nil {
		_ = os.Remove(archive)
		return nil, berth.WrapError(berth.EInternal, err, "cannot write snapshot metadata")
	}
	if err := atomicfile.SyncDir(dir); err != nil {
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
	bytes   int64         // regular file bytes written so far
	entries int           // entries written so far
	skipped int           // entries left out
	hide    []fs.FileInfo // the hidden paths that exist
}

// walk archives the contents of the directory dir, held open, whose name
// relative to the workspace is name ("." for the root itself), in name
// order, depth first. Every entry is looked at and opened in dir, one
// component at a time, so a directory renamed or swapped for a link
// meanwhile cannot lead the walk elsewhere; a hidden entry is left out.
func (a *archiver) walk(dir *os.Root, name string) error {
	d, err := dir.Open(".")
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
		entry := path.Join(name, e.Name())
		fi, err := dir.Lstat(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return err
		}
		if a.isHidden(fi) {
			a.skipped++
			continue
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			if err := a.subdir(dir, e.Name(), entry, fi); err != nil {
				return err
			}
		case mode&fs.ModeSymlink != 0:
			target, err := dir.Readlink(e.Name())
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			target = filepath.ToSlash(target)
			if linkcheck.LexicallyEscapes(entry, target) || linkcheck.Escapes(a.root, entry, target) {
				a.skipped++
				continue
			}
			if err := a.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: entry, Linkname: target, Mode: 0o777, ModTime: fi.ModTime()}); err != nil {
				return err
			}
		case mode.IsRegular():
			if err := a.file(dir, e.Name(), entry); err != nil {
				return err
			}
		default:
			a.skipped++
		}
	}
	return nil
}

// unopened sorts out why an entry could not be opened: one gone since it
// was listed is left out, one that now leads out of the workspace (a
// link swapped in) is skipped and counted, and any other error stops the
// archive.
func (a *archiver) unopened(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case strings.Contains(err.Error(), "path escapes from parent"):
		a.skipped++
		return nil
	}
	return err
}

// subdir archives the directory base of dir (entry in the archive), which
// Lstat found as fi: it is left out when what opens is not that directory
// (swapped for a link meanwhile).
func (a *archiver) subdir(dir *os.Root, base, entry string, fi fs.FileInfo) error {
	sub, err := dir.OpenRoot(base)
	if err != nil {
		return a.unopened(err)
	}
	defer sub.Close()
	st, err := sub.Stat(".")
	if err != nil {
		return err
	}
	if !os.SameFile(st, fi) || a.isHidden(st) {
		a.skipped++
		return nil
	}
	if err := a.header(&tar.Header{Typeflag: tar.TypeDir, Name: entry + "/", Mode: int64(st.Mode().Perm()), ModTime: st.ModTime()}); err != nil {
		return err
	}
	return a.walk(sub, entry)
}

// isHidden reports whether fi is one of the paths Create was told to hide.
func (a *archiver) isHidden(fi fs.FileInfo) bool {
	for _, h := range a.hide {
		if os.SameFile(fi, h) {
			return true
		}
	}
	return false
}

// file archives the regular file base of dir as entry. It opens without
// blocking and checks the opened file, so a FIFO swapped in meanwhile
// cannot hang it, and a link swapped in (os.Root follows it) is not read:
// what opened must be what base names once open, or, after a second try
// (a file replaced by rename, as editors save), the file is left out.
func (a *archiver) file(dir *os.Root, base, entry string) error {
	var f *os.File
	var fi fs.FileInfo
	for try := 0; ; try++ {
		var err error
		f, err = dir.OpenFile(base, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return a.unopened(err)
		}
		if fi, err = f.Stat(); err != nil {
			_ = f.Close()
			return err
		}
		now, err := dir.Lstat(base)
		if err == nil && os.SameFile(fi, now) && !a.isHidden(fi) {
			break
		}
		_ = f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if try == 1 || a.isHidden(fi) {
			a.skipped++
			return nil
		}
	}
	defer f.Close()
	if !fi.Mode().IsRegular() {
		a.skipped++
		return nil
	}
	size := fi.Size()
	if size > a.opts.MaxBytes-a.bytes {
		return berth.Errorf(berth.ETooLarge, "workspace is larger than the %d byte snapshot limit", a.opts.MaxBytes)
	}
	a.bytes += size
	if err := a.header(&tar.Header{Typeflag: tar.TypeReg, Name: entry, Size: size, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	n, err := io.Copy(a.tw, io.LimitReader(ctxReader{a.ctx, f}, size))
	if err != nil {
		return err
	}
	if n < size {
		return berth.Errorf(berth.EConflict, "workspace file %q shrank while it was archived; try again", entry)
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
