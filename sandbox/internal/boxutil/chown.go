package boxutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ChownTree gives dir and everything under it to uid:gid, without
// following symbolic links. With rootOnly, only what belongs to root
// changes hands. The hidden paths (SandboxConfig.Hide: the daemon's home,
// socket, database) and what lies under them never do, nor does a file
// with more than one link: its other names may lie outside dir (a hard
// link to a file of the system).
//
// dir may be written by a sandbox's processes while the walk runs (a
// session's agent, when another session shares its workspace): dir itself
// is opened without following a symbolic link on its path
// (OpenDirNoFollow), and every step goes through an os.Root on that
// descriptor, so a directory swapped for a symbolic link, before or
// during the walk, never leads a chown outside dir. The hidden paths are
// recognised by device and inode, whatever name dir reaches them by.
func ChownTree(dir string, uid, gid int, rootOnly bool, hidden []string) error {
	f, err := OpenDirNoFollow(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return ChownTreeAt(f, uid, gid, rootOnly, hidden)
}

// ChownTreeAt is ChownTree on the directory f holds open (pinned by
// OpenDirNoFollow).
func ChownTreeAt(f *os.File, uid, gid int, rootOnly bool, hidden []string) error {
	skip := fileIDs(hidden)
	root, err := os.OpenRoot(ProcPath(f))
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if _, hide := skip[fileID{uint64(st.Dev), st.Ino}]; hide {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if rootOnly && st.Uid != 0 || !fi.IsDir() && st.Nlink > 1 || int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		return root.Lchown(rel, uid, gid)
	})
}

// ChownPath gives the directories from root down to dir (both included,
// dir inside root) to uid:gid where they belong to root. A dir outside
// root, or not there yet, is left alone. As ChownTree, it never leaves
// root.
func ChownPath(rootDir, dir string, uid, gid int) error {
	rel, err := filepath.Rel(rootDir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil
	}
	f, err := OpenDirNoFollow(rootDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer f.Close()
	return ChownPathAt(f, rel, uid, gid)
}

// ChownPathAt is ChownPath on the directory f holds open (pinned by
// OpenDirNoFollow), rel the path of dir relative to it.
func ChownPathAt(f *os.File, rel string, uid, gid int) error {
	root, err := os.OpenRoot(ProcPath(f))
	if err != nil {
		return err
	}
	defer root.Close()
	path := "."
	parts := []string{"."}
	if rel != "." {
		parts = append(parts, strings.Split(rel, "/")...)
	}
	for _, part := range parts {
		path = filepath.Join(path, part)
		fi, err := root.Lstat(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 {
			if err := root.Lchown(path, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileID names a file by device and inode.
type fileID struct{ dev, ino uint64 }

// fileIDs stats paths (following links: they are the daemon's own) and
// returns the files they name; a path not there names none.
func fileIDs(paths []string) map[fileID]struct{} {
	out := make(map[fileID]struct{}, len(paths))
	for _, p := range paths {
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			out[fileID{uint64(st.Dev), st.Ino}] = struct{}{}
		}
	}
	return out
}
