package checkpoint

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// What other packages (objstore: docs/api.md, "Session state in an object
// store") use of a checkpoint's walk and blobs: the same tree, read the
// same careful way, with the same bounds.

// ScanFile is a regular file Scan found: Open opens it for reading,
// checked to be the very file the walk saw (no link or FIFO swapped in);
// ErrChanged when it is not any more.
type ScanFile struct {
	Entry
	open func() (*os.File, error)
}

// ErrChanged is a file that changed between the walk's look and its open.
var ErrChanged = errors.New("checkpoint: the file changed while it was read")

// Open opens the file; the caller closes it. Only while Scan's fn runs
// (the walk holds the file's directory open meanwhile).
func (f *ScanFile) Open() (*os.File, error) { return f.open() }

// Scan walks the directory dir as a checkpoint does, with the same
// bounds (opts, defaults filled in) and the same paths left out (.git,
// .gitignore'd, links out of dir, FIFOs, sockets and devices, hide),
// never following a link, and tells fn of each path kept, parents
// before their children; fn's file is nil but for a regular file. It
// returns the skipped paths (at most MaxListedSkips) and their count.
// ENotFound when dir is gone.
func Scan(ctx context.Context, dir string, opts Options, hide []string, fn func(e Entry, f *ScanFile) error) ([]Skip, int, error) {
	root, err := openWorkspace(dir)
	if err != nil {
		return nil, 0, err
	}
	defer root.Close()
	w := &walker{ctx: ctx, root: root, opts: opts.withDefaults()}
	for _, h := range hide {
		if fi, err := os.Stat(h); err == nil {
			w.hide = append(w.hide, fi)
		}
	}
	w.fn = func(v *visit) (bool, string, error) {
		var sf *ScanFile
		if v.entry.Kind == KindFile {
			e := v.entry
			sf = &ScanFile{Entry: e, open: func() (*os.File, error) {
				f, fi, err := openFile(v.dir, v.name)
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errSwapped) {
					return nil, ErrChanged
				}
				if err != nil {
					return nil, err
				}
				if k, ok := fileKeyOf(fi); !ok || k != (fileKey{e.Dev, e.Ino}) {
					_ = f.Close()
					return nil, ErrChanged
				}
				return f, nil
			}}
		}
		if err := fn(v.entry, sf); err != nil {
			if errors.Is(err, ErrChanged) {
				return false, SkipChanged, nil
			}
			return false, "", err
		}
		return true, "", nil
	}
	if err := w.walkDir(root, ".", ""); err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		var be *berth.Error
		if errors.As(err, &be) {
			return nil, 0, err
		}
		return nil, 0, berth.WrapError(berth.EInternal, err, "cannot read the directory")
	}
	return w.skipped, w.skipN, nil
}

// SameStat reports whether e and o describe the same, unchanged file
// (size, times, inode, device, mode): its content need not be read again.
func SameStat(e, o *Entry) bool { return e.sameStat(o) }

// ValidPath reports whether p is a clean relative path: no "..", no "."
// component, not absolute, no NUL.
func ValidPath(p string) bool { return validEntryPath(p) }

// ValidHash reports whether h is a lower-case hex SHA-256.
func ValidHash(h string) bool { return validHash(h) }

// Entries returns the whole manifest of the session's checkpoint id
// (its deltas resolved), sorted by path, every path and hash checked, with
// its metadata. ENotFound.
func (s *Store) Entries(sessionID, id string) (*Checkpoint, []Entry, error) {
	if !ids.ValidName(sessionID) {
		return nil, nil, berth.Errorf(berth.EInvalid, "invalid session id")
	}
	defer s.lockSession(sessionID)()
	m, err := s.readManifest(sessionID, id)
	if err != nil {
		return nil, nil, err
	}
	return m.meta, m.entries, nil
}

// OpenBlob opens the blob of hash for reading; ENotFound when the store
// has none (pruned since its manifest was read).
func (s *Store) OpenBlob(hash string) (*os.File, error) {
	if !validHash(hash) {
		return nil, berth.Errorf(berth.EInvalid, "invalid blob hash")
	}
	f, err := os.Open(s.blobPath(hash))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, berth.Errorf(berth.ENotFound, "no blob %s", hash[:12])
	}
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot read a checkpoint blob")
	}
	return f, nil
}
