package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"
	"github.com/berth-sh/berth/internal/wsdir"
)

// maxWorkspaceLinks bounds the symbolic links followed resolving a
// workspace path (the kernel's own bound).
const maxWorkspaceLinks = 40

// workspaceError is the 400 a refused workspace gets.
func workspaceError(format string, a ...any) error {
	return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf(format, a...),
		Details: map[string]any{"field": "workspace"}}
}

// resolveWorkspace resolves the user-given absolute workspace path, link
// by link, to the real directory the session stores and its sandbox
// opens (without following links) ever after. A symbolic link on the way
// is trusted only when the directory holding it belongs to root or to
// the daemon's user and no one else may write there, or it is a sticky
// one (/tmp) and the link is its owner's, root's or the daemon's user's:
// a link in a directory a sandbox owns (the host uid's, or uid 1000's
// under docker) is an attacker's, planted to turn the daemon's chown and
// bind onto another directory of the host.
func resolveWorkspace(p string) (string, error) {
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
			return "", workspaceError("workspace path has too many symbolic links")
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
			return "", workspaceError("workspace path goes through the symbolic link %s in a directory that belongs to uid %d or that others may write: a sandbox could have planted it; give the real path", next, dst.Uid)
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
		return "", workspaceError("workspace %q is not a directory", p)
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
		return workspaceError("workspace %q %s", p, why)
	}
	return workspaceError("workspace %q: %s %s", p, at, why)
}

// checkWorkspace refuses (400 naming field) the directory at the
// resolved path ws when it is not one user's project but a directory
// people share (wsdir.Check), but for one in berth's managed directory,
// which is berth's own. It is opened as a sandbox opens it, without
// following a link on its path, and checked through that descriptor.
func (pl *placement) checkWorkspace(ws, field string) error {
	if pathx.Within(resolvedPath(pl.workspacesDir()), ws) {
		return nil
	}
	f, err := wsdir.OpenNoFollow(ws)
	if err != nil {
		return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("%s %s cannot be opened: %s", field, ws, berth.ErrorMessage(err)),
			Details: map[string]any{"field": field}, Err: err}
	}
	defer f.Close()
	return wsdir.Check(f, ws, field, pl.sandboxUIDs())
}

// sandboxUIDs are the host uids berth's own sandboxes write as, besides
// root and the daemon's user (a root daemon's bwrap host_uid, docker's
// container uid): their files in a workspace are berth's, not another
// user's. A provider whose probe failed runs nothing here and is
// not asked: docker's would dial an engine that is not there, under
// a lock, for every create and every reattach.
func (pl *placement) sandboxUIDs() []int {
	var out []int
	for name, p := range pl.m.providers {
		if pl.m.availability(name) != nil {
			continue
		}
		if fo, ok := p.(berth.SandboxFileOwner); ok {
			if uid, _, _ := fo.FileOwner(); uid > 0 && !slices.Contains(out, uid) {
				out = append(out, uid)
			}
		}
	}
	slices.Sort(out)
	return out
}
