package wsdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-sh/berth/internal/core"
)

// maxWorkspaceLinks bounds the symbolic links followed resolving a
// workspace path (the kernel's own bound).
const maxWorkspaceLinks = 40

// refused is the 400 a refused workspace gets.
func refused(format string, a ...any) error {
	return &core.Error{Code: core.EInvalid, Message: fmt.Sprintf(format, a...),
		Details: map[string]any{"field": "workspace"}}
}

// Resolve resolves the user-given absolute workspace path, link
// by link, to the real directory the session stores and its sandbox
// opens (without following links) ever after. A symbolic link on the way
// is trusted only when the directory holding it belongs to root or to
// the daemon's user and no one else may write there, or it is a sticky
// one (/tmp) and the link is its owner's, root's or the daemon's user's:
// a link in a directory a sandbox owns (the host uid's, or uid 1000's
// under docker) is an attacker's, planted to turn the daemon's chown and
// bind onto another directory of the host.
func Resolve(p string) (string, error) {
	daemon := uint32(os.Geteuid())
	rest := strings.Split(filepath.Clean(p), "/")
	cur, links := "/", 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", missingWorkspace(p, next, err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxWorkspaceLinks {
			return "", refused("workspace path has too many symbolic links")
		}
		var dst syscall.Stat_t
		if err := syscall.Lstat(cur, &dst); err != nil {
			return "", missingWorkspace(p, cur, err)
		}
		var lst syscall.Stat_t
		_ = syscall.Lstat(next, &lst)
		trusted := dst.Uid == 0 || dst.Uid == daemon
		if dst.Mode&0o022 != 0 && (dst.Mode&syscall.S_ISVTX == 0 || lst.Uid != dst.Uid && lst.Uid != 0 && lst.Uid != daemon) {
			trusted = false
		}
		if !trusted {
			return "", refused("workspace path goes through the symbolic link %s in a directory that belongs to uid %d or that others may write: a sandbox could have planted it; give the real path", next, dst.Uid)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", missingWorkspace(p, next, err)
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	fi, err := os.Stat(cur)
	switch {
	case err != nil:
		return "", missingWorkspace(p, cur, err)
	case !fi.IsDir():
		return "", refused("workspace %q is not a directory", p)
	}
	return cur, nil
}

// missingWorkspace is the error of a workspace p whose path breaks at
// at (a part of it, or where a link led): which part, and why. Both are
// the user's own path.
func missingWorkspace(p, at string, err error) error {
	why := "cannot be read"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "does not exist"
	case errors.Is(err, fs.ErrPermission):
		why = "cannot be read by the daemon's user"
	case errors.Is(err, syscall.ENOTDIR):
		// The part before at is a file.
		at, why = filepath.Dir(at), "is not a directory"
	}
	if at == filepath.Clean(p) {
		return refused("workspace %q %s", p, why)
	}
	return refused("workspace %q: %s %s", p, at, why)
}
