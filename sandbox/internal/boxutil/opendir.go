package boxutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenDirNoFollow opens the directory at the absolute path dir one
// component at a time from /, with O_NOFOLLOW on each: a symbolic link
// anywhere on the path (one planted by a sandbox after the session was
// created with the path resolved) is refused rather than followed. The
// descriptor pins the inode reached; a root daemon chowns and binds
// through it (/proc/self/fd/N), never through the path again.
func OpenDirNoFollow(dir string) (*os.File, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%s: not an absolute path", dir)
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open("/", flags, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	walked := "/"
	for _, c := range strings.Split(filepath.Clean(dir), "/") {
		if c == "" {
			continue
		}
		walked = filepath.Join(walked, c)
		next, err := unix.Openat(fd, c, flags, 0)
		_ = unix.Close(fd)
		if err != nil {
			if err == unix.ELOOP || err == unix.ENOTDIR {
				return nil, fmt.Errorf("%s is a symbolic link or not a directory: a workspace path is walked without following links (it may have been replaced since the session was created)", walked)
			}
			return nil, &os.PathError{Op: "open", Path: walked, Err: err}
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// ProcPath is the path through which the directory f pins is reached by
// this process, whatever its name has become.
func ProcPath(f *os.File) string {
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd())
}
