// Package boxutil holds what the sandbox providers share: checking the
// directories a session gives them, and making and reading an environment
// list.
package boxutil

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth/internal/core"
)

// CheckDir refuses a path that is not an existing absolute directory
// (EInvalid). Messages start with provider and name the role, never the
// host path.
func CheckDir(provider, role, dir string) error {
	if !filepath.IsAbs(dir) {
		return core.Errorf(core.EInvalid, "%s: the %s must be an absolute path", provider, role)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return core.WrapError(core.EInvalid, err, "%s: the %s does not exist", provider, role)
	}
	if !fi.IsDir() {
		return core.Errorf(core.EInvalid, "%s: the %s is not a directory", provider, role)
	}
	return nil
}

// Environ sets a process's own entries, extra ("K=V" each), in env, the
// sandbox's environment, and returns env as sorted "K=V" entries, never
// nil: a nil exec.Cmd.Env would hand the daemon's environment over.
// EInvalid, the message starting with provider, for an entry that is not
// K=V, a name holding "=" or NUL, or a value holding NUL.
func Environ(provider string, env map[string]string, extra []string) ([]string, error) {
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, core.Errorf(core.EInvalid, "%s: environment entry %q is not K=V", provider, k)
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if strings.ContainsAny(k, "=\x00") || strings.Contains(env[k], "\x00") {
			return nil, core.Errorf(core.EInvalid, "%s: environment variable %q is malformed", provider, k)
		}
		out = append(out, k+"="+env[k])
	}
	return out, nil
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

// CheckInput refuses a spec whose Input a pipe's buffer may not take
// whole (core.MaxProcInput): writing it would wait for the process.
func CheckInput(provider string, spec core.ProcSpec) error {
	if len(spec.Input) > core.MaxProcInput {
		return core.Errorf(core.EInvalid, "%s: the process's first input is %d bytes, more than %d", provider, len(spec.Input), core.MaxProcInput)
	}
	return nil
}

// WriteInput writes spec.Input to stdin, the pipe a process started
// without spec.Stdin reads (CheckInput has passed it). A process gone
// already is seen by its exit, not here.
func WriteInput(stdin io.Writer, spec core.ProcSpec) {
	if len(spec.Input) > 0 && spec.Stdin == nil && stdin != nil {
		_, _ = stdin.Write(spec.Input)
	}
}
