// Package boxutil holds what the sandbox providers share: checking the
// directories a session gives them and reading an environment list.
package boxutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth"
)

// CheckDir refuses a path that is not an existing absolute directory
// (EInvalid). Messages start with provider and name the role, never the
// host path.
func CheckDir(provider, role, dir string) error {
	if !filepath.IsAbs(dir) {
		return berth.Errorf(berth.EInvalid, "%s: the %s must be an absolute path", provider, role)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return berth.WrapError(berth.EInvalid, err, "%s: the %s does not exist", provider, role)
	}
	if !fi.IsDir() {
		return berth.Errorf(berth.EInvalid, "%s: the %s is not a directory", provider, role)
	}
	return nil
}

// EnvValue returns the value of key in a "K=V" list ("" when absent).
func EnvValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// ProcPath is the path through which the directory f pins is reached by
// this process, whatever its name has become.
func ProcPath(f *os.File) string {
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd())
}
