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
func (ls *Session) hiddenIDs() map[fileID]bool {
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
func (ls *Session) isHidden(fi fs.FileInfo) bool {
	id, ok := idOf(fi)
	return !ok || ls.hidden[id]
}

// openConfined opens rel (relative to the workspace) the way the agent's
// file requests may: one directory at a time, each held open (pinned) and
// refused when it is a hidden path, symbolic links resolved by hand
// against the directories already pinned, the file itself opened in its
// pinned parent and refused when it is hidden or is not the one its name
// names once open. create makes missing directories (given to the agent's
// owner) for a write.
func (ls *Session) openConfined(rel string, flag int, perm os.FileMode, create bool) (*os.File, error) {
	if fi, err := ls.root.Stat("."); err != nil || ls.isHidden(fi) {
		return nil, errHidden
	}
	stack := []*os.Root{ls.root}
	defer func() {
		for _, r := range stack[1:] {
			_ = r.Close()
		}
	}()
	comps := splitPath(rel)
	hops := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		if c == ".." {
			if len(stack) == 1 {
				return nil, errEscape
			}
			_ = stack[len(stack)-1].Close()
			stack = stack[:len(stack)-1]
			continue
		}
		top := stack[len(stack)-1]
		last := len(comps) == 0
		fi, err := top.Lstat(c)
		if ls.afterLstat != nil {
			ls.afterLstat(c)
		}
		if errors.Is(err, fs.ErrNotExist) && create && !last {
			if err := top.Mkdir(c, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, err
			}
			fi, err = top.Lstat(c)
		}
		if err != nil && !(last && errors.Is(err, fs.ErrNotExist)) {
			return nil, err
		}
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if hops++; hops > maxSymlinkHops {
				return nil, syscall.ELOOP
			}
			target, err := top.Readlink(c)
			if err != nil {
				return nil, err
			}
			if filepath.IsAbs(target) {
				r, ok := ls.relPath(target)
				if !ok {
					return nil, errEscape
				}
				for _, r := range stack[1:] {
					_ = r.Close()
				}
				stack = stack[:1]
				target = r
			}
			comps = append(splitPath(target), comps...)
			continue
		}
		if last {
			return ls.openIn(top, c, flag, perm)
		}
		// The directory is checked as opened, and must still be what c
		// names: os.Root would follow a symbolic link swapped in after
		// the Lstat above (say into the home's sessions/).
		sub, err := top.OpenRoot(c)
		if err != nil {
			if strings.Contains(err.Error(), "path escapes from parent") {
				return nil, errSwapped
			}
			return nil, err
		}
		stack = append(stack, sub)
		st, err := sub.Stat(".")
		if err != nil {
			return nil, err
		}
		if ls.isHidden(st) {
			return nil, errHidden
		}
		if now, err := top.Lstat(c); err != nil || !os.SameFile(st, now) {
			return nil, errSwapped
		}
		if create {
			if err := ls.giveDir(sub, st); err != nil {
				return nil, err
			}
		}
	}
	return nil, errEscape
}

// openIn opens name in its pinned parent dir, refusing a hidden file and
// one that is not (or no longer) what name names: a symbolic link put in
// its place is followed by os.Root, so the name is looked at again.
func (ls *Session) openIn(dir *os.Root, name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := dir.OpenFile(name, flag, perm)
	if err != nil {
		if strings.Contains(err.Error(), "path escapes from parent") {
			return nil, errSwapped
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && ls.isHidden(fi) {
		err = errHidden
	}
	if err == nil {
		now, lerr := dir.Lstat(name)
		if lerr != nil || !os.SameFile(fi, now) {
			err = errSwapped
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// giveDir gives the agent's owner a directory of the workspace that
// belongs to root: one WriteTextFile just made.
func (ls *Session) giveDir(dir *os.Root, fi fs.FileInfo) error {
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
