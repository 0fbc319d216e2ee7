package session

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"

	live "github.com/berth-sh/berth/session/live"
)

// newLive returns the live session of s, about to start or be reattached.
func (m *Manager) newLive(c live.Config) *live.Session {
	c.Logger = m.logger
	return live.New(m.host, c)
}

// reserve takes a slot under limits.max_sessions for a session about to be
// created or resumed; goLive turns it into a live session, release gives
// it back.
func (m *Manager) reserve() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if max := m.opts.Limits.MaxSessions; max > 0 && len(m.live)+m.reserved >= max {
		return &berth.Error{Code: berth.EUnavailable, Message: "too many live sessions (limits.max_sessions)",
			Details: map[string]any{"max_sessions": max}}
	}
	m.reserved++
	return nil
}

// release gives back a reserved slot.
func (m *Manager) release() {
	m.mu.Lock()
	m.reserved--
	m.mu.Unlock()
}

// goLive makes ls the session's live session, taking over the slot it
// reserved when reserved is set, unless another live session of the session is
// live already: that one is returned, and ls is not live (its slot stays
// reserved, for the caller to release).
func (m *Manager) goLive(ls *live.Session, reserved bool) *live.Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	if other := m.live[ls.ID()]; other != nil {
		return other
	}
	if reserved {
		m.reserved--
	}
	m.live[ls.ID()] = ls
	return nil
}

// abandon drops a live session that never started, releasing whoever found it.
func (m *Manager) abandon(ls *live.Session) {
	m.forget(ls)
	ls.Abandon()
}

// sandboxConfig is the sandbox a session's agent runs in, for its start
// and, on reattach, for the terminals and execs the daemon opens.
func (m *Manager) sandboxConfig(s *berth.Session, spec berth.AgentSpec) berth.SandboxConfig {
	home := m.homeDir(s.ID)
	env := agentEnv(spec, s.ID, s.Env)
	binds := m.agentProgram(s, spec).binds
	binds = append(binds, worktreeBinds(s.Worktree)...)
	binds = append(binds, m.mountBinds(s)...)
	if b, ok := m.toolsBind(s); ok {
		binds = append(binds, b)
		// The agent runs `berth mcp` from berth's own binary.
		if m.opts.Berth != spec.Command && outsideSystemDirs(m.opts.Berth) {
			binds = append(binds, berth.Bind{Source: m.opts.Berth, Target: m.opts.Berth})
		}
	}
	return berth.SandboxConfig{SessionID: s.ID, Workspace: s.Workspace, Home: resolvedPath(home),
		Env: env, Network: s.Sandbox.Network, Binds: binds,
		Image: spec.DockerImage, Limits: m.boxLimits(s), Hide: m.hidden(),
		WorkspaceOwners: m.sandboxUIDs(), ManagedWorkspace: pathx.Within(resolvedPath(m.workspacesDir()), s.Workspace)}
}

// agentProgram is how the session's agent command runs in its sandbox
// (resolveAgentProgram); a bare name is the image's own under docker.
// Names are looked up in the PATH of the daemon and the catalog, never in
// one the session's env sets: a client does not choose which host files
// are bound.
func (m *Manager) agentProgram(s *berth.Session, spec berth.AgentSpec) agentProgram {
	path := agentEnv(spec, s.ID, nil)["PATH"]
	return resolveAgentProgram(spec.Command, path, m.capsOf(s.Sandbox.Provider).HostPaths, m.opts.UserHome)
}

// homeDir is the session's private HOME.
func (m *Manager) homeDir(id string) string { return filepath.Join(m.sessionDir(id), "home") }

// systemDirs are visible inside every isolating sandbox already.
var systemDirs = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"}

// outsideSystemDirs reports whether the absolute path p lies outside the
// system directories (and so must be bound to be seen in a sandbox).
func outsideSystemDirs(p string) bool {
	return filepath.IsAbs(p) && !slices.ContainsFunc(systemDirs, func(d string) bool { return strings.HasPrefix(p, d) })
}

// agentEnv builds the agent's environment: a few host basics, the agent's
// declared pass-through variables, its catalog env, then the session's env.
func agentEnv(spec berth.AgentSpec, sessionID string, extra map[string]string) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"PATH", "LANG", "TERM", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	for _, k := range spec.PassEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	env["BERTH_SESSION_ID"] = sessionID
	return env
}
