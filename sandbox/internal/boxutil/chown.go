package boxutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/wsdir"
)

// ChownTree gives dir and everything under it to uid:gid. With rootOnly,
// only what belongs to root changes hands. The hidden paths
// (SandboxConfig.Hide: the daemon's home, socket, database) and what lies
// under them never do, nor does a file with more than one link: its other
// names may lie outside dir (a hard link to a file of the system).
//
// dir may be written by a sandbox's processes while the walk runs (a
// session's agent, when another session shares its workspace): dir itself
// is opened without following a symbolic link on its path
// (wsdir.OpenNoFollow), and the walk (wsdir.Walk) follows no link, enters
// no other mount and never goes above dir; each change goes through a
// descriptor of the file itself, checked to be the one the walk met. So
// nothing outside dir's own filesystem tree changes hands, whatever the
// sandbox renames or plants meanwhile. The hidden paths are recognised by
// device and inode, whatever name dir reaches them by.
func ChownTree(dir string, uid, gid int, rootOnly bool, hidden []string) error {
	f, err := wsdir.OpenNoFollow(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return ChownTreeAt(f, uid, gid, rootOnly, hidden)
}

// ChownTreeAt is ChownTree on the directory f holds open (pinned by
// wsdir.OpenNoFollow).
func ChownTreeAt(f *os.File, uid, gid int, rootOnly bool, hidden []string) error {
	skip := fileIDs(hidden)
	give := func(st *unix.Stat_t) bool {
		if rootOnly && st.Uid != 0 || int(st.Uid) == uid && int(st.Gid) == gid {
			return false
		}
		return st.Mode&unix.S_IFMT == unix.S_IFDIR || st.Nlink <= 1
	}
	return wsdir.Walk(f, 0, func(e *wsdir.Entry) error {
		if _, hide := skip[fileID{e.Stat.Dev, e.Stat.Ino}]; hide {
			return wsdir.SkipDir
		}
		if !give(&e.Stat) {
			return nil
		}
		return e.Chown(uid, gid, give)
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
	f, err := wsdir.OpenNoFollow(rootDir)
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
// wsdir.OpenNoFollow), rel the path of dir relative to it. It goes down
// one directory at a time, as wsdir.Walk does: through no symbolic link,
// onto no other mount; it stops where the path is not there, or is not
// such a directory.
func ChownPathAt(f *os.File, rel string, uid, gid int) error {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	how := &unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV}
	cur, err := unix.Openat2(int(f.Fd()), ".", how)
	if err != nil {
		return &os.PathError{Op: "open", Path: ".", Err: err}
	}
	defer func() { _ = unix.Close(cur) }()
	parts := []string{}
	if rel != "." {
		parts = strings.Split(rel, "/")
	}
	for i := 0; ; i++ {
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return &os.PathError{Op: "fstat", Path: rel, Err: err}
		}
		if st.Uid == 0 {
			if err := unix.Fchown(cur, uid, gid); err != nil {
				return &os.PathError{Op: "chown", Path: rel, Err: err}
			}
		}
		if i == len(parts) {
			return nil
		}
		next, err := unix.Openat2(cur, parts[i], how)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
				return nil
			}
			return &os.PathError{Op: "open", Path: rel, Err: err}
		}
		_ = unix.Close(cur)
		cur = next
	}
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
			out[fileID{uint64(st.Dev), st.Ino}] = struct{}{} //nolint:unconvert // Dev is uint32 on some platforms
		}
	}
	return out
}
