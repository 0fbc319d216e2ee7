package session

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/pathx"
	"github.com/berth-sh/berth/shim"
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

// liveConfig says how a live session begins.
type liveConfig struct {
	// session is the session as stored, spec its agent.
	session *berth.Session
	spec    berth.AgentSpec
	logger  *slog.Logger
	// resumeFrom, with resumed set, is the ACP session a resumed session
	// reopens ("" when the agent never opened one).
	resumed    bool
	resumeFrom string
	// fork is what a session forked from a checkpoint starts from.
	fork *forkFrom
	// shim, with provider and box, is the shim of a reattached session
	// whose agent runs on, and its sandbox as the shim opened it.
	shim     *shim.Proc
	provider berth.SandboxProvider
	box      berth.SandboxConfig
}

// newRuntime returns the live session c says, not started yet.
func newRuntime(h *liveHost, c liveConfig) *runtime {
	s := c.session
	rt := &runtime{h: h, id: s.ID, sess: *s, spec: c.spec, workspace: s.Workspace,
		ready: make(chan struct{}), handshook: make(chan struct{}), finished: make(chan struct{}),
		perms: make(map[string]*permWaiter), remembered: make(map[string]string),
		outcomes: make(map[string]entryOutcome), inputChanged: make(chan struct{}),
		logger: c.logger.With("session_id", s.ID), tree: treeState{parent: s.ParentID},
		resumed: c.resumed, resumeFrom: c.resumeFrom, fork: c.fork}
	if c.shim != nil {
		rt.provider, rt.shim, rt.boxRef, rt.shimSocket = c.provider, c.shim, c.shim.Hello().Ref, s.ShimSocket
		rt.boxCfg = c.box
		rt.setACPSession(s.ACP.SessionID)
	}
	return rt
}

// newRuntime returns the live session of s, about to start or be reattached.
func (m *Manager) newRuntime(c liveConfig) *runtime {
	c.logger = m.logger
	return newRuntime(m.host, c)
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
	rt.abandon()
}

// abandon ends a session that never started: whoever waits for it is released.
func (rt *runtime) abandon() {
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
