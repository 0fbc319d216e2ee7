package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
)

// errLinkedPath is a directory reached through a symbolic link on its path.
var errLinkedPath = errors.New("a symbolic link or not a directory on its path")

// openRootNoFollow opens the absolute directory dir as an os.Root, one
// component at a time from /, following no symbolic link on the way: a
// workspace's path is stored real, and a link on it now was planted (a
// parent session's agent can replace its child's workspace, a directory
// of its own, with a link to any host directory), so reading through it
// would checkpoint, and a rewind write, a directory the session was never
// given. errLinkedPath when a component is a link or not a directory;
// fs.ErrNotExist when one is missing.
func openRootNoFollow(dir string) (*os.Root, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%s: not an absolute path", dir)
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open("/", flags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	for _, c := range strings.Split(filepath.Clean(dir), "/") {
		if c == "" {
			continue
		}
		next, err := unix.Openat(fd, c, flags, 0)
		_ = unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, errLinkedPath
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: dir, Err: err}
		}
		fd = next
	}
	defer unix.Close(fd)
	// The pinned directory itself, whatever its path names meanwhile.
	return os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", fd))
}

// openWorkspace opens a workspace for a capture or a restore
// (openRootNoFollow): ENotFound when it is gone, EConflict when a link or
// a file stands on its path.
func openWorkspace(workspace string) (*os.Root, error) {
	root, err := openRootNoFollow(workspace)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, berth.Errorf(berth.ENotFound, "workspace does not exist")
	case errors.Is(err, errLinkedPath):
		return nil, berth.Errorf(berth.EConflict, "the workspace's path goes through a symbolic link or a file (one was put there since the session was created): refused")
	case err != nil:
		return nil, berth.WrapError(berth.EInternal, err, "cannot open workspace")
	}
	return root, nil
}
