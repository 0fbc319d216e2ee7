package session

import (
	"maps"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"
	"github.com/berth-sh/berth/internal/safegit"

	"github.com/berth-sh/berth/session/agentprog"
	live "github.com/berth-sh/berth/session/live"
)

// newLive returns the live session of s, about to start or be reattached.
func (m *Manager) newLive(c live.Config) *live.Session {
	c.Logger = m.logger
	return live.New(m.host, c)
}

// abandon drops a live session that never started, releasing whoever found it.
func (m *Manager) abandon(ls *live.Session) {
	m.set.forget(ls)
	ls.Abandon()
}

// sandboxConfig is the sandbox a session's agent runs in, for its start
// and, on reattach, for the terminals and execs the daemon opens.
func (pl *placement) sandboxConfig(s *berth.Session, spec berth.AgentSpec) berth.SandboxConfig {
	env := agentEnv(spec, s.ID, s.Env, pl.m.models.env(s, spec))
	// The proxy's variables win over the session's own.
	maps.Copy(env, pl.m.net.env(s))
	binds := pl.agentProgram(s, spec).Binds
	binds = append(binds, safegit.WorktreeBinds(s.Worktree)...)
	binds = append(binds, pl.mountBinds(s)...)
	tools, toolsOK := pl.m.tools.bind(s)
	if toolsOK {
		binds = append(binds, tools)
	}
	model, modelOK := pl.m.models.bind(s, spec)
	if modelOK {
		binds = append(binds, model)
	}
	// The agent runs `berth mcp`, or runs under `berth agent-exec`, from
	// berth's own binary: bound where the sandbox does not see it (outside
	// the system directories, or anywhere in a container's own files).
	if (toolsOK || modelOK) && pl.m.opts.Berth != spec.Command && (agentprog.OutsideSystemDirs(pl.m.opts.Berth) || !pl.capsOf(s.Sandbox.Provider).HostPaths) {
		binds = append(binds, berth.Bind{Source: pl.m.opts.Berth, Target: pl.m.opts.Berth})
	}
	own := pl.ownPaths()
	return berth.SandboxConfig{SessionID: s.ID, Workspace: s.Workspace, Home: resolvedUnder(own.sessions, s.ID, "home"),
		Env: env, Network: s.Sandbox.Network, Binds: binds,
		Image: spec.DockerImage, Limits: pl.boxLimits(s), Hide: own.hidden,
		WorkspaceOwners: pl.sandboxUIDs(), ManagedWorkspace: pathx.Within(own.workspaces, s.Workspace)}
}

// agentProgram is how the session's agent command runs in its sandbox
// (agentprog.Resolve); a bare name is the image's own under docker.
// Names are looked up in the PATH of the daemon and the catalog, never in
// one the session's env sets: a client does not choose which host files
// are bound.
func (pl *placement) agentProgram(s *berth.Session, spec berth.AgentSpec) agentprog.Program {
	path := agentEnv(spec, s.ID, nil, nil)["PATH"]
	return agentprog.Resolve(spec.Command, path, pl.capsOf(s.Sandbox.Provider).HostPaths, pl.m.opts.UserHome)
}

// homeDir is the session's private HOME.
func (pl *placement) homeDir(id string) string { return filepath.Join(pl.sessionDir(id), "home") }

// agentEnv builds the agent's environment: a few host basics, the agent's
// declared pass-through variables, its catalog env, the session's env,
// then gateway, the variables that point it at the model gateway. An
// agent pointed at the gateway inherits none of the daemon's model
// credentials (modelSecretVars): the gateway's placeholders win.
func agentEnv(spec berth.AgentSpec, sessionID string, extra, gateway map[string]string) map[string]string {
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
		if gateway != nil && modelSecretVars[k] {
			continue
		}
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
	for k, v := range gateway {
		env[k] = v
	}
	env["BERTH_SESSION_ID"] = sessionID
	return env
}
