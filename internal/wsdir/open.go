// Package wsdir is how berth opens, walks and checks a session's
// workspace directory without being led elsewhere: opened one component
// at a time without following a symbolic link, walked without following
// one nor entering another mount, and refused when it is not one user's
// project but a directory people share (docs/api.md, Sessions, and
// "Sandboxes and the network"). The daemon checks a workspace when a
// session is created or resumed, and a root daemon's sandbox provider
// checks again the directory it pinned, before it gives anything of it
// away.
package wsdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLinked is what the error of OpenNoFollow is (errors.Is) when a
// component of the path is a symbolic link or not a directory.
var ErrLinked = errors.New("a symbolic link or not a directory on the path")

// linkedError names the first component of a path that is a symbolic link
// or not a directory.
type linkedError struct{ walked string }

// Error names the component and why it is refused.
func (e *linkedError) Error() string {
	return e.walked + " is a symbolic link or not a directory: a workspace path is walked without following links (it may have been replaced since the session was created)"
}

// Is makes a linkedError ErrLinked.
func (e *linkedError) Is(target error) bool { return target == ErrLinked }

// OpenNoFollow opens the directory at the absolute path dir one component
// at a time from /, with O_NOFOLLOW on each: a symbolic link anywhere on
// the path (one planted by a sandbox after the session was created with
// the path resolved) is refused rather than followed. The descriptor pins
// the inode reached; a root daemon checks, chowns and binds through it
// (/proc/self/fd/N), never through the path again. A link or a file on
// the path is ErrLinked.
func OpenNoFollow(dir string) (*os.File, error) {
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
				return nil, &linkedError{walked}
			}
			return nil, &os.PathError{Op: "open", Path: walked, Err: err}
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), dir), nil
}
