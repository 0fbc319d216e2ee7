package wsdir

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"

	"golang.org/x/sys/unix"
)

// SkipDir, returned by a walk's function for a directory, keeps the walk
// out of it.
var SkipDir = fs.SkipDir

// beneath is how every walk resolves a path from a directory it holds:
// never above it, through no symbolic link, onto no other mount.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV

// readBatch is how many names a walk reads from a directory at a time.
const readBatch = 1024

// Entry is one file a walk meets.
type Entry struct {
	// Rel is its slash path from the walk's top ("." for the top).
	Rel string
	// Stat is its Lstat, taken through the directory that holds it.
	Stat unix.Stat_t
	// dir is the descriptor of the directory holding it (the top's own
	// for the top), open while the walk's function runs; name is its
	// name there ("." for the top).
	dir  int
	name string
}

// IsDir reports whether the entry is a directory.
func (e *Entry) IsDir() bool { return e.Stat.Mode&unix.S_IFMT == unix.S_IFDIR }

// Chown gives the entry to uid:gid when want, shown its Lstat as it is
// now, says so. The change goes through a descriptor of the entry itself
// (O_PATH, a symbolic link as such) opened the way the walk opens
// directories; an entry that is no longer the file the walk met (swapped
// or removed since) or is a mount point is left alone.
func (e *Entry) Chown(uid, gid int, want func(*unix.Stat_t) bool) error {
	fd, err := openBeneath(e.dir, e.name, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		if leftOut(err) {
			return nil
		}
		return &os.PathError{Op: "open", Path: e.Rel, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: e.Rel, Err: err}
	}
	if st.Dev != e.Stat.Dev || st.Ino != e.Stat.Ino || !want(&st) {
		return nil
	}
	if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "chown", Path: e.Rel, Err: err}
	}
	return nil
}

// Walk calls fn for the directory top holds open, then for everything
// below it, breadth first. It never follows a symbolic link, never leaves
// top's filesystem (an entry on another device is left out, and a mount
// point of the same one, a bind mount, is met but not entered), and never
// goes above top: every directory is opened from top with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV, and one that is no
// longer the directory listed (swapped or removed since) is left out, as
// is one too deep for a path. With limit > 0 the walk ends after that
// many entries, the top included. fn returns SkipDir to keep the walk out
// of a directory; any other error ends the walk and is returned.
func Walk(top *os.File, limit int, fn func(*Entry) error) error {
	tfd := int(top.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(tfd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: top.Name(), Err: err}
	}
	w := &walker{top: tfd, dev: st.Dev, limit: limit, fn: fn}
	if err := w.visit(&Entry{Rel: ".", Stat: st, dir: tfd, name: "."}); err != nil {
		return w.result(err)
	}
	for len(w.queue) > 0 {
		q := w.queue[0]
		w.queue = w.queue[1:]
		if err := w.list(q); err != nil {
			return w.result(err)
		}
	}
	return nil
}

// errLimit ends a walk that met its limit of entries.
var errLimit = errors.New("walk: limit reached")

// queued is a directory a walk is still to list, with the file it was.
type queued struct {
	rel      string
	dev, ino uint64
}

// walker is one Walk's state.
type walker struct {
	top   int
	dev   uint64
	limit int
	seen  int
	fn    func(*Entry) error
	queue []queued
}

// result is what Walk returns for err, the error that ended it.
func (w *walker) result(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// visit calls fn for e and queues e when it is a directory to enter.
func (w *walker) visit(e *Entry) error {
	if w.limit > 0 && w.seen >= w.limit {
		return errLimit
	}
	w.seen++
	err := w.fn(e)
	if err == SkipDir {
		return nil
	}
	if err != nil {
		return err
	}
	if e.IsDir() {
		w.queue = append(w.queue, queued{rel: e.Rel, dev: e.Stat.Dev, ino: e.Stat.Ino})
	}
	return nil
}

// list visits the entries of the directory q.
func (w *walker) list(q queued) error {
	fd, err := openBeneath(w.top, q.rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		if leftOut(err) {
			return nil
		}
		return &os.PathError{Op: "open", Path: q.rel, Err: err}
	}
	d := os.NewFile(uintptr(fd), q.rel)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: q.rel, Err: err}
	}
	if st.Dev != q.dev || st.Ino != q.ino {
		return nil
	}
	for {
		names, err := d.Readdirnames(readBatch)
		for _, name := range names {
			e := &Entry{Rel: path.Join(q.rel, name), dir: fd, name: name}
			if err := unix.Fstatat(fd, name, &e.Stat, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if leftOut(err) {
					continue
				}
				return &os.PathError{Op: "lstat", Path: e.Rel, Err: err}
			}
			if e.Stat.Dev != w.dev {
				continue
			}
			if err := w.visit(e); err != nil {
				return err
			}
		}
		if err == io.EOF || err != nil && leftOut(err) {
			return nil
		}
		if err != nil {
			return &os.PathError{Op: "readdir", Path: q.rel, Err: err}
		}
	}
}

// maxRetries bounds the tries of an open that the kernel saw race a
// rename or a mount (EAGAIN): an agent renaming without end in its
// workspace makes the walk fail, never loop.
const maxRetries = 64

// openBeneath opens name from the directory dir holds the way a walk
// does (beneath).
func openBeneath(dir int, name string, flags int) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: beneath}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dir, name, how)
		if err != unix.EINTR && err != unix.EAGAIN || i == maxRetries {
			return fd, err
		}
	}
}

// leftOut reports whether err, met opening or reading an entry, means the
// walk leaves the entry out rather than fails: it is gone, a symbolic
// link or a mount point now, or too deep for a path.
func leftOut(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) ||
		errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENAMETOOLONG)
}
