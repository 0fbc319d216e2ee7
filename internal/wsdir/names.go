package wsdir

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// sharedDirs are directories of the host that are no one's project,
// whoever runs the daemon: a workspace may be none of them, nor above
// one (/ is above them all).
var sharedDirs = []string{"/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
	"/lost+found", "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys",
	"/tmp", "/usr", "/usr/local", "/var", "/var/lib", "/var/tmp"}

// virtualDirs hold no one's files, whoever runs the daemon: a workspace
// may not lie inside one either.
var virtualDirs = []string{"/dev", "/proc", "/run", "/sys"}

// systemDirs are the host's system directories: under a root daemon a
// workspace may not lie inside one either (their root-owned files would
// become the sandbox's user's).
var systemDirs = []string{"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/boot", "/dev", "/proc", "/sys", "/run", "/var", "/opt", "/srv", "/snap"}

// systemName says why the workspace at the clean absolute path name is
// refused by its name alone, or "" when it is not: it is one of
// sharedDirs or above one, or inside one of virtualDirs; under a root
// daemon also inside one of systemDirs, or a user's home directory as
// /etc/passwd lists it (root's included) or above one.
func systemName(name string, root bool) string {
	for _, d := range sharedDirs {
		if within(name, d) {
			return "it is a system directory or one people share (/, /usr, /etc, /home, /mnt, /media, /srv, /tmp, /var/tmp, ...) or lies above one; pick a project directory"
		}
	}
	if !root {
		for _, d := range virtualDirs {
			if within(d, name) {
				return "it lies in /dev, /proc, /run or /sys, which hold no one's project; pick a project directory"
			}
		}
		return ""
	}
	for _, d := range systemDirs {
		if within(d, name) {
			return "under a root daemon a workspace may not lie in a system directory (/etc, /usr, /var, /opt, /srv, ...): the sandbox's user would be given its files; pick a project directory"
		}
	}
	for _, home := range passwdHomes() {
		if within(name, home) {
			return "under a root daemon a workspace may not be a user's home directory nor lie above one: the sandbox's user would be given its files; pick a project directory below it"
		}
	}
	return ""
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
		home := filepath.Clean(fields[5])
		if r, err := filepath.EvalSymlinks(home); err == nil {
			home = r
		}
		out = append(out, home)
	}
	return out
}

// within reports whether the clean absolute path p is base or lies below
// it.
func within(base, p string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+"/")
}
