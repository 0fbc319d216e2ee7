package session

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-sh/berth"
)

// maxWorkspaceLinks bounds the symbolic links followed resolving a
// workspace path (the kernel's own bound).
const maxWorkspaceLinks = 40

// hostSystemDirs are the host's system directories: under a root daemon a
// workspace may be none of them, nor inside one, nor an ancestor of one.
var hostSystemDirs = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/boot", "/dev", "/proc", "/sys", "/run", "/var", "/opt", "/srv", "/snap"}

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
			return "", workspaceError("workspace does not exist or is not a directory")
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
			return "", workspaceError("workspace does not exist or is not a directory")
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
			return "", workspaceError("workspace does not exist or is not a directory")
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	if fi, err := os.Stat(cur); err != nil || !fi.IsDir() {
		return "", workspaceError("workspace does not exist or is not a directory")
	}
	return cur, nil
}

// checkNotSystem refuses, under a root daemon, a workspace whose files
// the sandbox would take over to the host's harm: /, a system directory
// (hostSystemDirs), one inside one or an ancestor of one, a user's home
// directory as listed in /etc/passwd (root's included) or an ancestor of
// one (/home). A project directory below a home is fine. ws is resolved.
func checkNotSystem(ws string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	const why = "under a root daemon a workspace may not be /, a system directory (/etc, /usr, /var, ...), one inside or above one, nor a user's home directory or a directory above one: the sandbox's user would be given its files; pick a project directory"
	for _, sys := range hostSystemDirs {
		if within(sys, ws) || within(ws, sys) {
			return workspaceError("workspace %s refused: %s", ws, why)
		}
	}
	for _, home := range passwdHomes() {
		if within(ws, home) {
			return workspaceError("workspace %s refused: %s", ws, why)
		}
	}
	return nil
}

// passwdHomes lists the home directories of /etc/passwd, resolved.
func passwdHomes() []string {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 7 || !filepath.IsAbs(fields[5]) {
			continue
		}
		out = append(out, resolvedPath(fields[5]))
	}
	return out
}
