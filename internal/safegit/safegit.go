// Package safegit runs git for the daemon on repositories an agent may
// have written to (docs/api.md, "Worktrees, files and mounts"): no hook,
// filter, helper, transport or pager a repository's config names ever
// runs, and the daemon's GIT_* variables steer nothing.
package safegit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
)

// gitTimeout bounds one git command the daemon runs (a checkout of a large
// tree included).
const gitTimeout = 5 * time.Minute

// gitOutputCap bounds what is kept of a git command's stdout and stderr.
const gitOutputCap = 64 << 10

// gitSafety are the -c overrides every git the daemon runs gets: a
// repository's own config (and one an agent with a workspace in the
// repository could have written) must not make the daemon run a program.
// Hooks are off (post-checkout, reference-transaction), fsmonitor is off
// (core.fsmonitor names a program), no transport may run (a partial
// clone's lazy fetch, a submodule's clone: ssh, ext::, remote helpers),
// nothing recurses into submodules, no credential helper, pager or
// askpass runs, and no automatic gc or maintenance is spawned. Filter
// drivers, whose names the config chooses, are emptied one by one
// (FilterOverrides).
var gitSafety = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.sshCommand=false",
	"-c", "core.askPass=",
	"-c", "core.pager=cat",
	"-c", "credential.helper=",
	"-c", "protocol.allow=never",
	"-c", "protocol.file.allow=never",
	"-c", "protocol.git.allow=never",
	"-c", "protocol.ssh.allow=never",
	"-c", "protocol.http.allow=never",
	"-c", "protocol.https.allow=never",
	"-c", "protocol.ext.allow=never",
	"-c", "submodule.recurse=false",
	"-c", "fetch.recurseSubmodules=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "advice.detachedHead=false",
}

// gitEnv is the whole environment of a git the daemon runs: none of the
// daemon's GIT_* variables (GIT_DIR, GIT_CONFIG_*, GIT_EXEC_PATH, ...)
// steers it, no terminal prompt, no system-wide config file.
func gitEnv() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", "GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_NO_LAZY_FETCH=1", "GIT_PROTOCOL_FROM_USER=0"}
	if h, err := os.UserHomeDir(); err == nil {
		env = append(env, "HOME="+h)
	}
	return env
}

// gitError is a git command's failure: its exit and the last of its stderr.
type gitError struct {
	args   []string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

func (e *gitError) Unwrap() error { return e.err }

// Run runs git with args (after gitSafety and extra) in dir, as the
// leader of a process group of its own, killed whole at gitTimeout or when
// ctx ends, with gitEnv and no stdin. It returns the stdout.
func Run(ctx context.Context, dir string, extra []string, args ...string) ([]byte, error) {
	path, err := exec.LookPath("git")
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "git is not installed on the daemon's host")
	}
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	full := append(append(append([]string{}, gitSafety...), extra...), args...)
	cmd := exec.CommandContext(ctx, path, full...)
	cmd.Dir, cmd.Env = dir, gitEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The whole group goes at the deadline: a filter or helper that got
	// past the overrides dies with git.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr capped
	stdout.max, stderr.max = gitOutputCap, gitOutputCap
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err = cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return stdout.Bytes(), &gitError{args: args, err: err, stderr: stderr.String()}
	}
	return stdout.Bytes(), nil
}

// capped is a buffer that keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// FilterOverrides empties every filter driver the repository's config
// (with its includes) defines: a .gitattributes in the checked-out tree
// may name any of them, and a driver's smudge or process command would
// run as the daemon.
func FilterOverrides(ctx context.Context, repo string) ([]string, error) {
	out, err := Run(ctx, repo, nil, "config", "--null", "--name-only", "--get-regexp", `^filter\.`)
	var ge *gitError
	if errors.As(err, &ge) {
		var ee *exec.ExitError
		if errors.As(ge.err, &ee) && ee.ExitCode() == 1 {
			// No filter at all.
			return nil, nil
		}
	}
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var extra []string
	for _, key := range strings.Split(string(out), "\x00") {
		// filter.<name>.<var>, where the name may hold dots.
		i, j := strings.Index(key, "."), strings.LastIndex(key, ".")
		if i < 0 || j <= i {
			continue
		}
		name := key[i+1 : j]
		if strings.ContainsAny(name, "=\n") {
			// It could not be overridden on git's command line.
			return nil, berth.Errorf(berth.EInvalid, "the repository's config defines a filter driver named %q, which berth cannot switch off: refused", name)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		for _, v := range []string{"smudge", "clean", "process"} {
			extra = append(extra, "-c", "filter."+name+"."+v+"=")
		}
		extra = append(extra, "-c", "filter."+name+".required=false")
	}
	return extra, nil
}
