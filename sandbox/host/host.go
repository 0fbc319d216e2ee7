// Package host is the sandbox provider that isolates nothing (docs/api.md,
// "Sandbox providers"): agents run as the daemon's user, on the host's
// filesystem and network. What it does give them is the process hygiene
// every core.Sandbox owes: the session's workspace as working directory,
// a private HOME, only the environment the caller passed (plus PATH), and
// a process group of their own that Stop kills whole.
package host

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/procgroup"
	"github.com/berth-sh/berth/sandbox/internal/boxutil"
)

// Provider makes host sandboxes. It is stateless and safe for concurrent use.
type Provider struct{}

var _ core.SandboxProvider = (*Provider)(nil)

// New returns the host provider.
func New() *Provider { return &Provider{} }

// Name is "host".
func (*Provider) Name() string { return core.SandboxHost }

// Capabilities implements core.SandboxProvider: no isolation, the host's
// paths and network, nothing bound, no limits; SandboxAuto's fallback.
func (*Provider) Capabilities() core.SandboxCapabilities {
	return core.SandboxCapabilities{Fallback: true, HostPaths: true, HostNetwork: true}
}

// Probe always succeeds: the host is always there.
func (*Provider) Probe(context.Context) error { return nil }

// LimitsMemory says the host provider enforces no memory limit: Open
// ignores SandboxLimits, and a session that asks for one is refused.
func (*Provider) LimitsMemory() error {
	return core.Errorf(core.EUnavailable, "the host sandbox isolates nothing and enforces no memory limit (use bwrap or docker)")
}

var _ core.SandboxMemoryLimiter = (*Provider)(nil)

// Open checks cfg and returns a sandbox that runs processes directly on the
// host. cfg.Workspace must be an existing absolute directory, and so must
// cfg.Home when set (EInvalid otherwise). cfg.Network is not enforced: the
// host provider cannot take the network away.
func (*Provider) Open(ctx context.Context, cfg core.SandboxConfig) (core.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := boxutil.CheckDir("host", "workspace", cfg.Workspace); err != nil {
		return nil, err
	}
	if cfg.Home != "" {
		if err := boxutil.CheckDir("host", "home", cfg.Home); err != nil {
			return nil, err
		}
	}
	cfg.Env = maps.Clone(cfg.Env)
	return &Sandbox{cfg: cfg}, nil
}

// Sandbox runs one session's processes on the host.
type Sandbox struct {
	cfg    core.SandboxConfig
	closed atomic.Bool
}

var _ core.Sandbox = (*Sandbox)(nil)

// Start starts spec in its own process group. Its environment is the
// sandbox's Env, PATH (the daemon's when Env has none, as nothing else of
// the daemon's environment is passed), HOME = the sandbox's home, then
// spec.Env, later entries winning. A spec.Path without "/" is looked up in
// that PATH. The working directory is spec.Dir (relative to the workspace
// when relative) or the workspace. ctx only bounds the start: the process
// outlives it and ends through Process.Stop.
//
// Errors: EInvalid for a bad spec, EUnavailable when the program cannot be
// started (not found, not executable) or the sandbox is closed.
func (s *Sandbox) Start(ctx context.Context, spec core.ProcSpec) (core.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, core.Errorf(core.EUnavailable, "host: sandbox is closed")
	}
	if spec.Path == "" {
		return nil, core.Errorf(core.EInvalid, "host: no program to start")
	}
	if err := boxutil.CheckInput("host", spec); err != nil {
		return nil, err
	}
	env, err := s.environ(spec.Env)
	if err != nil {
		return nil, err
	}
	path := spec.Path
	if !strings.Contains(path, "/") {
		if path, err = lookPath(spec.Path, boxutil.EnvValue(env, "PATH")); err != nil {
			return nil, core.WrapError(core.EUnavailable, err, "host: command %q not found in PATH", spec.Path)
		}
	}
	dir := s.cfg.Workspace
	if spec.Dir != "" {
		dir = spec.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.cfg.Workspace, dir)
		}
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   append([]string{spec.Path}, spec.Args...),
		Env:    env,
		Dir:    dir,
		Stdin:  spec.Stdin,
		Stdout: spec.Stdout,
		Stderr: spec.Stderr,
	}
	p, err := procgroup.StartProc(cmd)
	if err != nil {
		return nil, core.WrapError(core.EUnavailable, err, "host: cannot start %q", filepath.Base(spec.Path))
	}
	boxutil.WriteInput(p.Stdin(), spec)
	return p, nil
}

// Close releases nothing (the host has nothing to release) and refuses
// later Starts. Processes already started are the caller's to Stop.
func (s *Sandbox) Close(context.Context) error {
	s.closed.Store(true)
	return nil
}

// environ builds a process's environment as sorted "K=V" entries. It is
// never nil: a nil exec.Cmd.Env would hand the daemon's environment over.
func (s *Sandbox) environ(extra []string) ([]string, error) {
	m := maps.Clone(s.cfg.Env)
	if m == nil {
		m = make(map[string]string)
	}
	if _, ok := m["PATH"]; !ok {
		if p, ok := os.LookupEnv("PATH"); ok {
			m["PATH"] = p
		}
	}
	if s.cfg.Home != "" {
		m["HOME"] = s.cfg.Home
	}
	return boxutil.Environ("host", m, extra)
}

// lookPath finds file in the directories of pathList, as a shell would,
// but skips relative entries ("", ".") so that nothing is run from the
// daemon's own working directory.
func lookPath(file, pathList string) (string, error) {
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
