package boxutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// ChownTree gives dir and everything under it to uid:gid, without
// following symbolic links. With rootOnly, only what belongs to root
// changes hands. The hidden paths (SandboxConfig.Hide: the daemon's home,
// socket, database) and what lies under them never do, nor does a file
// with more than one link: its other names may lie outside dir (a hard
// link to a file of the system).
func ChownTree(dir string, uid, gid int, rootOnly bool, hidden []string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(hidden, path) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		if rootOnly && st.Uid != 0 || !d.IsDir() && st.Nlink > 1 || int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		return os.Lchown(path, uid, gid)
	})
}

// ChownPath gives the directories from root down to dir (both included,
// dir inside root) to uid:gid where they belong to root. A dir outside
// root, or not there yet, is left alone.
func ChownPath(root, dir string, uid, gid int) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil
	}
	path := root
	parts := []string{"."}
	if rel != "." {
		parts = append(parts, strings.Split(rel, "/")...)
	}
	for _, part := range parts {
		path = filepath.Join(path, part)
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st.Uid == 0 {
			if err := os.Lchown(path, uid, gid); err != nil {
				return err
			}
		}
	}
	return nil
}
