package session

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// The one path from a started agent to a live runtime, for a created, a
// resumed and a reattached session alike:
//
//	reserve  a slot under limits.max_sessions (create, resume)
//	goLive   the runtime is in Manager.live: requests find it
//	wire     the started agent is the runtime's process and ACP client
//	run      its readers and its monitor start
//
// create and resume go live before the agent starts (a stop or a second
// resume finds the session starting); reattach goes live once the shim
// answered and the turn in flight is set up. Either way wire and run are
// the last two steps, from start (create, resume) or reattach.

// newRuntime returns the runtime of a session about to start.
func (m *Manager) newRuntime(s *berth.Session, spec berth.AgentSpec) *runtime {
	return &runtime{h: m.host, id: s.ID, sess: *s, spec: spec, workspace: s.Workspace,
		ready: make(chan struct{}), handshook: make(chan struct{}), finished: make(chan struct{}),
		perms: make(map[string]*permWaiter), remembered: make(map[string]string),
		outcomes: make(map[string]entryOutcome), inputChanged: make(chan struct{}),
		logger: m.logger.With("session_id", s.ID), tree: treeState{parent: s.ParentID}}
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

// goLive makes rt the session's live runtime, taking over the slot it
// reserved when reserved is set, unless another runtime of the session is
// live already: that one is returned, and rt is not live (its slot stays
// reserved, for the caller to release).
func (m *Manager) goLive(rt *runtime, reserved bool) *runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	if other := m.live[rt.id]; other != nil {
		return other
	}
	if reserved {
		m.reserved--
	}
	m.live[rt.id] = rt
	return nil
}

// abandon drops a runtime that never started, releasing whoever found it.
func (m *Manager) abandon(rt *runtime) {
	m.forget(rt)
	close(rt.ready)
	close(rt.handshook)
	close(rt.finished)
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
		WorkspaceOwners: m.sandboxUIDs(), ManagedWorkspace: within(resolvedPath(m.workspacesDir()), s.Workspace)}
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

// wire makes the started agent proc the runtime's process: its terminals,
// its confined workspace and its ACP client, reading the agent's stdout
// from the stream position opts names. Nothing runs yet (see run).
func (rt *runtime) wire(proc berth.Process, opts acp.Options) *agentHandler {
	rt.proc = proc
	rt.terminals = newTerminals(rt)
	var err error
	if rt.wsReal, err = filepath.EvalSymlinks(rt.workspace); err != nil {
		rt.wsReal = rt.workspace
	}
	if rt.root, err = os.OpenRoot(rt.wsReal); err != nil {
		rt.logger.Warn("workspace root", "err", err)
	}
	rt.hidden = rt.hiddenIDs()
	opts.MaxLineBytes, opts.Logger = rt.h.limits.MaxLineBytes, rt.logger
	opts.OnSkippedLine, opts.OnOversizedLine = rt.skippedLine, rt.oversizedLine
	opts.AdmitRequest = rt.admitRequest
	handler := &agentHandler{rt: rt}
	rt.client = acp.NewClient(acp.Pipe{R: proc.Stdout(), W: proc.Stdin()}, handler, opts)
	return handler
}

// run starts what serves a wired runtime: the stderr reader, the ACP
// client (then the agent's requests redelivered, those a reattached
// session's previous daemon left unanswered) and the monitor, which alone
// finishes the session.
func (rt *runtime) run(redeliver [][]byte) {
	rt.stderrWG.Add(1)
	go rt.readStderr(rt.proc.Stderr())
	rt.client.Start()
	for _, line := range redeliver {
		rt.client.Redeliver(line)
	}
	rt.h.monitors.Add(1)
	go rt.monitor()
}

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
