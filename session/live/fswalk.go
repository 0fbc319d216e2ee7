package live

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxSymlinkHops bounds the symbolic links one file access may follow,
// as the kernel's own ELOOP limit does.
const maxSymlinkHops = 40

// fileID is a file's identity: its device and inode.
type fileID struct{ dev, ino uint64 }

// idOf returns fi's identity; ok is false when fi carries none.
func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true //nolint:unconvert // Dev is uint32 on some platforms
}

// errHidden is a walk reaching a hidden path; errEscape one leaving the
// workspace; errSwapped the file opened not being the one at the path.
var (
	errHidden  = errors.New("a hidden path")
	errEscape  = errors.New("resolves outside the workspace")
	errSwapped = errors.New("changed while it was opened")
)

// hiddenIDs stats the paths no sandbox may see (Manager.hidden) once, at
// the live session's start; those that do not exist are skipped.
func (f *files) hiddenIDs() map[fileID]bool {
	ls := f.ls
	ids := map[fileID]bool{}
	for _, p := range ls.h.Hidden {
		if fi, err := os.Stat(p); err == nil {
			if id, ok := idOf(fi); ok {
				ids[id] = true
			}
		}
	}
	return ids
}

// isHidden reports whether fi is one of the hidden paths.
func (f *files) isHidden(fi fs.FileInfo) bool {
	id, ok := idOf(fi)
	return !ok || f.hidden[id]
}

// openConfined opens rel (relative to the workspace) the way the agent's
// file requests may: one directory at a time, each held open (pinned) and
// refused when it is a hidden path, symbolic links resolved by hand
// against the directories already pinned, the file itself opened in its
// pinned parent and refused when it is hidden or is not the one its name
// names once open. create makes missing directories (given to the agent's
// owner) for a write.
func (f *files) openConfined(rel string, flag int, perm os.FileMode, create bool) (*os.File, error) {
	if fi, err := f.root.Stat("."); err != nil || f.isHidden(fi) {
		return nil, errHidden
	}
	w := &confinedWalk{f: f, dirs: []*os.Root{f.root}, comps: splitPath(rel), create: create}
	defer w.unpin(1)
	for len(w.comps) > 0 {
		c := w.comps[0]
		w.comps = w.comps[1:]
		if c == ".." {
			if len(w.dirs) == 1 {
				return nil, errEscape
			}
			w.unpin(len(w.dirs) - 1)
			continue
		}
		last := len(w.comps) == 0
		fi, err := w.lstat(c, last)
		switch {
		case err != nil:
			return nil, err
		case fi != nil && fi.Mode()&fs.ModeSymlink != 0:
			err = w.follow(c)
		case last:
			return f.openIn(w.top(), c, flag, perm)
		default:
			err = w.descend(c)
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, errEscape
}

// confinedWalk is one walk of openConfined: the directories pinned so
// far, the root first, and the components still to walk.
type confinedWalk struct {
	f      *files
	dirs   []*os.Root
	comps  []string
	hops   int
	create bool
}

// top is the directory the walk is in.
func (w *confinedWalk) top() *os.Root { return w.dirs[len(w.dirs)-1] }

// unpin closes the pinned directories from the n-th on (the root stays).
func (w *confinedWalk) unpin(n int) {
	for _, r := range w.dirs[max(n, 1):] {
		_ = r.Close()
	}
	w.dirs = w.dirs[:max(n, 1)]
}

// lstat looks at component c of the directory the walk is in, making it
// when the walk creates and c is a missing directory on the way. A last
// component that does not exist is nil and no error: opening it creates
// it, or says it is not there.
func (w *confinedWalk) lstat(c string, last bool) (fs.FileInfo, error) {
	top := w.top()
	fi, err := top.Lstat(c)
	if w.f.afterLstat != nil {
		w.f.afterLstat(c)
	}
	if errors.Is(err, fs.ErrNotExist) && w.create && !last {
		if err := top.Mkdir(c, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		fi, err = top.Lstat(c)
	}
	if last && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return fi, err
}

// follow puts the target of the symbolic link c in place of c: an
// absolute one is walked from the workspace's root, and must be in it.
func (w *confinedWalk) follow(c string) error {
	if w.hops++; w.hops > maxSymlinkHops {
		return syscall.ELOOP
	}
	target, err := w.top().Readlink(c)
	if err != nil {
		return err
	}
	if filepath.IsAbs(target) {
		rel, ok := w.f.relPath(target)
		if !ok {
			return errEscape
		}
		w.unpin(1)
		target = rel
	}
	w.comps = append(splitPath(target), w.comps...)
	return nil
}

// descend pins directory c. It is checked as opened, and must still be
// what c names: os.Root would follow a symbolic link swapped in after the
// Lstat that saw a directory (say into the home's sessions/).
func (w *confinedWalk) descend(c string) error {
	top := w.top()
	sub, err := top.OpenRoot(c)
	if err != nil {
		if strings.Contains(err.Error(), "path escapes from parent") {
			return errSwapped
		}
		return err
	}
	w.dirs = append(w.dirs, sub)
	st, err := sub.Stat(".")
	if err != nil {
		return err
	}
	if w.f.isHidden(st) {
		return errHidden
	}
	if now, err := top.Lstat(c); err != nil || !os.SameFile(st, now) {
		return errSwapped
	}
	if w.create {
		return w.f.giveDir(sub, st)
	}
	return nil
}

// openIn opens name in its pinned parent dir, refusing a hidden file and
// one that is not (or no longer) what name names: a symbolic link put in
// its place is followed by os.Root, so the name is looked at again.
func (f *files) openIn(dir *os.Root, name string, flag int, perm os.FileMode) (*os.File, error) {
	file, err := dir.OpenFile(name, flag, perm)
	if err != nil {
		if strings.Contains(err.Error(), "path escapes from parent") {
			return nil, errSwapped
		}
		return nil, err
	}
	fi, err := file.Stat()
	if err == nil && f.isHidden(fi) {
		err = errHidden
	}
	if err == nil {
		now, lerr := dir.Lstat(name)
		if lerr != nil || !os.SameFile(fi, now) {
			err = errSwapped
		}
	}
	if err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

// giveDir gives the agent's owner a directory of the workspace that
// belongs to root: one WriteTextFile just made.
func (f *files) giveDir(dir *os.Root, fi fs.FileInfo) error {
	ls := f.ls
	uid, gid, ok := ls.box.fileOwner()
	if !ok {
		return nil
	}
	if st, is := fi.Sys().(*syscall.Stat_t); is && st.Uid == 0 {
		return dir.Chown(".", uid, gid)
	}
	return nil
}

// splitPath splits a relative path into its components, dropping empty
// ones and ".".
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}
