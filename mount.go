package berth

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Mount is one entry of [[sandbox.mounts]]: a host directory or file an
// operator allows sessions to see read-only at Target, requested by Name
// at create (docs/api.md, "Worktrees, files and mounts").
type Mount struct {
	Name   string `json:"name"`
	Host   string `json:"host"`
	Target string `json:"target"`
}

// mountNeeds are the sandbox's own directories: no mount may be bound on
// one, inside one or above one (the system directories bound from the
// host, the sandbox's /proc, /dev, /tmp and /etc).
var mountNeeds = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
	"/proc", "/dev", "/sys", "/tmp", "/var/tmp", "/run", "/opt", "/boot"}

// Validate checks a mount as the config gives it: a name of letters,
// digits, '.', '_' and '-'; an absolute host path; a target that is
// absolute and clean and neither is, lies in nor lies above a directory
// the sandbox needs for itself. EInvalid otherwise. Whether the host path
// exists, and the target against a session's workspace, are checked where
// the mount is used.
func (m Mount) Validate() error {
	if m.Name == "" || strings.Trim(m.Name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" || len(m.Name) > 64 {
		return Errorf(EInvalid, "mount name %q must be 1 to 64 letters, digits, '.', '_' or '-'", m.Name)
	}
	if !filepath.IsAbs(m.Host) {
		return Errorf(EInvalid, "mount %s: host %q must be an absolute path", m.Name, m.Host)
	}
	t := m.Target
	if !filepath.IsAbs(t) || filepath.Clean(t) != t || t == "/" {
		return Errorf(EInvalid, "mount %s: target %q must be an absolute, clean path other than /", m.Name, t)
	}
	for _, d := range mountNeeds {
		if t == d || strings.HasPrefix(t, d+"/") || strings.HasPrefix(d, t+"/") {
			return &Error{Code: EInvalid, Message: fmt.Sprintf("mount %s: target %s is, lies in or above %s, which the sandbox needs", m.Name, t, d)}
		}
	}
	return nil
}
