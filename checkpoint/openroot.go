package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/wsdir"
)

// openRootNoFollow opens the absolute directory dir as an os.Root, one
// component at a time from / (wsdir.OpenNoFollow), following no symbolic
// link on the way: a workspace's path is stored real, and a link on it now
// was planted (a parent session's agent can replace its child's
// workspace, a directory of its own, with a link to any host directory),
// so reading through it would checkpoint, and a rewind write, a directory
// the session was never given. wsdir.ErrLinked when a component is a link
// or not a directory; fs.ErrNotExist when one is missing.
func openRootNoFollow(dir string) (*os.Root, error) {
	f, err := wsdir.OpenNoFollow(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The pinned directory itself, whatever its path names meanwhile.
	return os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
}

// openWorkspace opens a workspace for a capture or a restore
// (openRootNoFollow): ENotFound when it is gone, EConflict when a link or
// a file stands on its path.
func openWorkspace(workspace string) (*os.Root, error) {
	root, err := openRootNoFollow(workspace)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, berth.Errorf(berth.ENotFound, "workspace does not exist")
	case errors.Is(err, wsdir.ErrLinked):
		return nil, berth.Errorf(berth.EConflict, "the workspace's path goes through a symbolic link or a file (one was put there since the session was created): refused")
	case err != nil:
		return nil, berth.WrapError(berth.EInternal, err, "cannot open workspace")
	}
	return root, nil
}
