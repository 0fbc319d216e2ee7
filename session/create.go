package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/ids"
)

// validEnvName reports whether s can name an environment variable:
// [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(s string) bool {
	for i, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// maxLabels bounds the labels of one session.
const maxLabels = 64

// CreateSession implements berth.SessionService.
func (m *Manager) CreateSession(ctx context.Context, req berth.CreateRequest) (*berth.Session, error) {
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.inflight.Done()

	spec, provider, unisolated, err := m.validateCreate(&req)
	if err != nil {
		return nil, err
	}
	// A session that does not ask gets the network when its agent needs it
	// (or [sandbox] network says so) and policy allows; when policy does
	// not, it runs without and is told why.
	network, netWarning := req.Network, ""
	if !network && (spec.Network || m.opts.Sandbox.Network) {
		if m.opts.Sandbox.AllowNetwork {
			network = true
		} else if spec.Network {
			netWarning = fmt.Sprintf("agent %s needs the network to reach its model, but [sandbox] allow_network is false: it runs without network", spec.Name)
		}
	}
	if err := m.reserve(); err != nil {
		return nil, err
	}
	registered := false
	defer func() {
		if !registered {
			m.release()
		}
	}()
	// The caller may hang up: once something is written, the session is
	// carried to a recorded state regardless.
	ctx = context.WithoutCancel(ctx)

	now := time.Now().UTC()
	id := ids.New("ses")
	s := &berth.Session{
		ID: id, Name: req.Name, Agent: spec.Name, State: berth.StateStarting, Badge: berth.BadgeStarting,
		Workspace: req.Workspace, Sandbox: berth.SandboxSpec{Provider: provider.Name(), Network: network},
		PermissionMode: req.PermissionMode, Labels: req.Labels, Env: req.Env,
		CreatedAt: now, UpdatedAt: now, LastActivityAt: now,
		TTLSeconds: req.TTLSeconds, IdleTimeoutSeconds: req.IdleTimeoutSeconds,
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if req.TTLSeconds > 0 {
		exp := now.Add(time.Duration(req.TTLSeconds) * time.Second)
		s.ExpiresAt = &exp
	}
	if s.Workspace == "" {
		s.Workspace = filepath.Join(m.workspacesDir(), id)
		s.ManagedWorkspace = true
	}
	home := filepath.Join(m.sessionDir(id), "home")
	if err := mkdirs(home, s.Workspace, s.ManagedWorkspace); err != nil {
		return nil, err
	}
	if req.FromSnapshot != "" {
		// A fork: the new workspace starts as the snapshot's copy.
		if err := m.restoreSnapshot(ctx, req.FromSnapshot, s.Workspace); err != nil {
			_ = os.RemoveAll(s.Workspace)
			return nil, err
		}
	}
	if err := m.store.CreateSession(ctx, s); err != nil {
		return nil, fmt.Errorf("store session: %w", err)
	}
	rt := m.newRuntime(s, spec)
	// Announced before anything else can change it, so session_created
	// comes first.
	rt.mu.Lock()
	rt.publishLocked(berth.ChangeSessionCreated)
	rt.mu.Unlock()
	m.register(rt)
	registered = true

	rt.emit("", berth.EventSessionCreated, map[string]any{
		"agent": spec.Name, "sandbox": s.Sandbox, "workspace": s.Workspace})
	if netWarning != "" {
		rt.emit("", berth.EventRuntimeWarning, map[string]any{"reason": netWarning})
	}
	if unisolated {
		rt.emit("", berth.EventRuntimeWarning, map[string]any{
			"reason": "no sandbox provider with isolation works on this host: the agent runs without isolation (sandbox host)"})
	}

	if err := rt.start(ctx, provider, home); err != nil {
		return nil, err
	}
	// The answer's last_seq covers session_started: commit it first.
	if err := m.log.FlushSession(ctx, id); err != nil {
		rt.logger.Warn("flush after create", "err", err)
	}
	out := rt.view()
	if strings.TrimSpace(req.Prompt) != "" && out.State == berth.StateActive {
		if _, err := m.Prompt(ctx, id, berth.PromptRequest{Text: req.Prompt}); err != nil {
			rt.logger.Warn("first prompt not started", "err", err)
		}
		out = rt.view()
	}
	return out, nil
}

// newRuntime returns the runtime of a session about to start.
func (m *Manager) newRuntime(s *berth.Session, spec berth.AgentSpec) *runtime {
	return &runtime{m: m, id: s.ID, sess: *s, spec: spec, workspace: s.Workspace,
		ready: make(chan struct{}), handshook: make(chan struct{}), finished: make(chan struct{}),
		perms: make(map[string]*permWaiter), remembered: make(map[string]string),
		outcomes: make(map[string]entryOutcome), inputChanged: make(chan struct{}),
		logger: m.logger.With("session", s.ID)}
}

// reserve takes a slot under limits.max_sessions for a session about to be
// created; register turns it into a live session, release gives it back.
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

// register makes a reserved session live.
func (m *Manager) register(rt *runtime) {
	m.mu.Lock()
	m.reserved--
	m.live[rt.id] = rt
	m.mu.Unlock()
}

// validateCreate checks a create request and fills its defaults. Nothing
// is written before it passes.
func (m *Manager) validateCreate(req *berth.CreateRequest) (berth.AgentSpec, berth.SandboxProvider, bool, error) {
	if strings.TrimSpace(req.Agent) == "" {
		return berth.AgentSpec{}, nil, false, berth.Errorf(berth.EInvalid, "agent is required")
	}
	spec, ok := m.opts.Catalog.Get(req.Agent)
	if !ok {
		return spec, nil, false, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("unknown agent %q", req.Agent),
			Details: map[string]any{"field": "agent"}}
	}
	if req.PermissionMode == "" {
		req.PermissionMode = berth.PermApproveReads
	}
	switch req.PermissionMode {
	case berth.PermDenyAll, berth.PermApproveReads, berth.PermApproveAll, berth.PermAsk:
	default:
		return spec, nil, false, berth.Errorf(berth.EInvalid, "permission_mode must be one of deny-all, approve-reads, approve-all, ask")
	}
	if req.Workspace != "" {
		if !filepath.IsAbs(req.Workspace) {
			return spec, nil, false, berth.Errorf(berth.EInvalid, "workspace must be an absolute path")
		}
		fi, err := os.Stat(req.Workspace)
		if err != nil || !fi.IsDir() {
			return spec, nil, false, &berth.Error{Code: berth.EInvalid, Message: "workspace does not exist or is not a directory",
				Details: map[string]any{"field": "workspace"}}
		}
		req.Workspace = filepath.Clean(req.Workspace)
		if err := m.checkNotDaemons(req.Workspace); err != nil {
			return spec, nil, false, err
		}
	}
	if err := req.ValidateTimes(); err != nil {
		return spec, nil, false, err
	}
	if req.FromSnapshot != "" {
		if req.Workspace != "" {
			return spec, nil, false, &berth.Error{Code: berth.EInvalid, Message: "from_snapshot restores into a new managed workspace: omit workspace",
				Details: map[string]any{"field": "workspace"}}
		}
		if m.opts.Snapshots == nil {
			return spec, nil, false, berth.Errorf(berth.EInvalid, "snapshots are not configured")
		}
		if _, err := m.opts.Snapshots.Get(context.Background(), req.FromSnapshot); err != nil {
			if berth.IsCode(err, berth.ENotFound) {
				return spec, nil, false, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("unknown snapshot %q", req.FromSnapshot),
					Details: map[string]any{"field": "from_snapshot"}}
			}
			return spec, nil, false, err
		}
	}
	if len(req.Labels) > maxLabels {
		return spec, nil, false, berth.Errorf(berth.EInvalid, "at most %d labels", maxLabels)
	}
	for k := range req.Labels {
		if k == "" || strings.ContainsAny(k, "=,") {
			return spec, nil, false, berth.Errorf(berth.EInvalid, "label key %q is not valid", k)
		}
	}
	for k := range req.Env {
		if !validEnvName(k) {
			return spec, nil, false, berth.Errorf(berth.EInvalid, "env name %q is not valid", k)
		}
	}
	provider, unisolated, err := m.pickSandbox(req.Sandbox, req.Network)
	return spec, provider, unisolated, err
}

// checkNotDaemons refuses a workspace that is the daemon's home or lies
// inside it (its socket, database, run directory, other sessions' homes
// would be the agent's), but for a managed workspace under
// $BERTH_HOME/workspaces/ (a child sharing its parent's). Paths are
// compared with their symbolic links resolved. A workspace that contains
// the home is allowed: the sandbox covers the home there
// (SandboxConfig.Hide).
func (m *Manager) checkNotDaemons(ws string) error {
	if m.opts.Home == "" {
		return nil
	}
	real := resolvedPath(ws)
	home := resolvedPath(m.opts.Home)
	if !within(home, real) {
		return nil
	}
	if managed := resolvedPath(m.workspacesDir()); within(managed, real) && real != managed {
		return nil
	}
	return &berth.Error{Code: berth.EInvalid, Message: "workspace is the daemon's home or lies inside it: the agent would reach the daemon's socket and database; pick another directory, or omit workspace for a managed one",
		Details: map[string]any{"field": "workspace"}}
}

// hidden is what no sandbox may see: the daemon's home, and Options.Hidden.
func (m *Manager) hidden() []string {
	var out []string
	for _, p := range append([]string{m.opts.Home}, m.opts.Hidden...) {
		if p != "" {
			out = append(out, resolvedPath(p))
		}
	}
	return out
}

// resolvedPath is p, clean, with its symbolic links resolved where they
// can be.
func resolvedPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// pickSandbox resolves the requested provider against policy and probes.
// unisolated reports that "auto" found no isolating provider and fell back
// to host.
func (m *Manager) pickSandbox(name string, network bool) (_ berth.SandboxProvider, unisolated bool, _ error) {
	pol := m.opts.Sandbox
	if network && !pol.AllowNetwork {
		return nil, false, berth.Errorf(berth.EForbidden, "network access is not allowed by [sandbox] allow_network")
	}
	if name == "" {
		name = pol.Default
	}
	if name == berth.SandboxAuto {
		if p, ok := m.providers[berth.SandboxBwrap]; ok && m.available[berth.SandboxBwrap] == nil {
			return p, false, nil
		}
		if pol.RequireIsolation {
			return nil, false, berth.Errorf(berth.EUnavailable, "no sandbox with isolation works on this host and [sandbox] require_isolation is set")
		}
		name, unisolated = berth.SandboxHost, true
	} else if name == berth.SandboxHost && !pol.AllowHost {
		return nil, false, berth.Errorf(berth.EForbidden, "sandbox host is not allowed by [sandbox] allow_host")
	}
	switch name {
	case berth.SandboxHost, berth.SandboxBwrap, berth.SandboxDocker:
	default:
		return nil, false, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("unknown sandbox provider %q", name),
			Details: map[string]any{"field": "sandbox"}}
	}
	p, ok := m.providers[name]
	if !ok {
		return nil, false, berth.Errorf(berth.EUnavailable, "sandbox provider %s is not available in this build", name)
	}
	if err := m.available[name]; err != nil {
		return nil, false, berth.WrapError(berth.EUnavailable, err, "sandbox provider %s is not available: %s", name, berth.ErrorMessage(err))
	}
	return p, unisolated, nil
}

// systemDirs are visible inside every isolating sandbox already.
var systemDirs = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"}

// sandboxBinds lists what an agent needs from the host inside its sandbox:
// its own program when it lives outside the system directories (berth's
// binary for the demo agent), and its home_files — the user's credentials —
// read-only at the same place under the session's private HOME.
func (m *Manager) sandboxBinds(spec berth.AgentSpec, home string) []berth.Bind {
	var binds []berth.Bind
	if filepath.IsAbs(spec.Command) && !slices.ContainsFunc(systemDirs, func(d string) bool { return strings.HasPrefix(spec.Command, d) }) {
		binds = append(binds, berth.Bind{Source: spec.Command, Target: spec.Command})
	}
	userHome := m.opts.UserHome
	if userHome == "" {
		return binds
	}
	for _, f := range spec.HomeFiles {
		rel := filepath.Clean(strings.TrimSuffix(f, "/"))
		if filepath.IsAbs(rel) || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		src := filepath.Join(userHome, rel)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		binds = append(binds, berth.Bind{Source: src, Target: filepath.Join(home, rel)})
	}
	return binds
}

// mkdirs creates the session's private HOME and, when managed, its workspace.
func mkdirs(home, workspace string, managed bool) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return berth.WrapError(berth.EInternal, err, "create session home")
	}
	if managed {
		if err := os.MkdirAll(workspace, 0o755); err != nil {
			return berth.WrapError(berth.EInternal, err, "create workspace")
		}
	}
	return nil
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

// start opens the sandbox, starts the agent and completes the ACP
// handshake. A failure stops the session as startup_failed; it is an error
// for the caller only when nothing could be recorded. ctx is not cancelled
// (CreateSession detaches it): every path ends in a recorded state.
func (rt *runtime) start(ctx context.Context, provider berth.SandboxProvider, home string) error {
	defer close(rt.handshook)
	m := rt.m
	rt.mu.Lock()
	env, network := rt.sess.Env, rt.sess.Sandbox.Network
	// The agent's stdout continues the session's stream offsets.
	base := rt.sess.AgentOffset
	rt.mu.Unlock()
	rt.provider = provider
	rt.boxCfg = berth.SandboxConfig{SessionID: rt.id, Workspace: rt.workspace, Home: home,
		Env: agentEnv(rt.spec, rt.id, env), Network: network, Binds: m.sandboxBinds(rt.spec, home),
		Image: rt.spec.DockerImage, Limits: m.opts.Sandbox.Limits, Hide: m.hidden()}
	proc, f := rt.startAgent(ctx, base)
	if f != nil {
		return rt.failStart(ctx, f)
	}
	rt.proc = proc
	rt.terminals = newTerminals(rt)
	var err error
	if rt.wsReal, err = filepath.EvalSymlinks(rt.workspace); err != nil {
		rt.wsReal = rt.workspace
	}
	if rt.root, err = os.OpenRoot(rt.wsReal); err != nil {
		rt.logger.Warn("workspace root", "err", err)
	}
	handler := &agentHandler{rt: rt}
	rt.client = acp.NewClient(acp.Pipe{R: proc.Stdout(), W: proc.Stdin()}, handler, acp.Options{
		MaxLineBytes: m.opts.Limits.MaxLineBytes, Logger: rt.logger, OnSkippedLine: rt.skippedLine,
		OnOversizedLine: rt.oversizedLine,
		StartOffset:     base,
	})
	// The pid (and the shim) are recorded before anything can stop the
	// session, so a daemon that dies now leaves what the next one needs to
	// reattach, or to kill what is left.
	if err := rt.save(ctx, func(s *berth.Session) {
		s.AgentPID, s.ShimSocket, s.ShimPID = proc.Pid(), "", 0
		if rt.shim != nil {
			s.ShimSocket, s.ShimPID = rt.shimSocket, rt.shim.ShimPID()
		}
	}); err != nil {
		rt.logger.Warn("record agent pid", "err", err)
	}
	rt.stderrWG.Add(1)
	go rt.readStderr(proc.Stderr())
	rt.client.Start()
	m.monitors.Add(1)
	go rt.monitor()
	// From here stop() can reach the agent; a stop that came earlier
	// is acted on now, and the handshake below fails fast.
	close(rt.ready)

	hctx, cancel := context.WithTimeout(ctx, m.opts.Limits.HandshakeTimeout)
	defer cancel()
	init, err := rt.client.Initialize(hctx, acp.Implementation{Name: "berth", Version: m.opts.Version})
	if err != nil {
		return rt.handshakeFailed(ctx, "initialize", err)
	}
	if init.ProtocolVersion != acp.ProtocolVersion {
		return rt.handshakeFailed(ctx, "initialize", fmt.Errorf("agent speaks ACP protocol version %d, berth speaks %d", init.ProtocolVersion, acp.ProtocolVersion))
	}
	acpID, resumedBy, err := rt.openACPSession(hctx, &init, handler)
	if err != nil {
		return rt.handshakeFailed(ctx, "session/new", err)
	}
	info := berth.ACPInfo{SessionID: acpID, ProtocolVersion: init.ProtocolVersion,
		AgentInfo: init.AgentInfo, Capabilities: init.AgentCapabilities, AuthMethods: init.AuthMethods}

	// Going active and logging session_started are one step, so neither a
	// stop nor the agent's exit can slip between them.
	rt.mu.Lock()
	if rt.exited || rt.stopReason != "" {
		rt.mu.Unlock()
		// A stop or the agent's exit raced the handshake; the monitor finishes the session.
		<-rt.finished
		return nil
	}
	rt.acpID = acpID
	err = rt.saveLocked(ctx, berth.StateStarting, func(s *berth.Session) { s.State, s.ACP = berth.StateActive, info })
	if err == nil {
		rt.emit("", berth.EventSessionStarted, map[string]any{
			"agent_info": info.AgentInfo, "protocol_version": info.ProtocolVersion,
			"capabilities": info.Capabilities, "resumed_by": resumedBy})
		// A resumed session runs what it had queued.
		rt.dispatchLocked(ctx)
	}
	rt.mu.Unlock()
	if err != nil {
		rt.logger.Error("could not record active", "err", err)
		rt.requestStop(berth.StopStartupFailed, &berth.Failure{Kind: berth.FailInternal, Message: "the session could not be recorded active"})
		_, _ = rt.proc.Stop(ctx, m.opts.Limits.StopGrace)
		<-rt.finished
	}
	return nil
}

// openACPSession opens the agent's side of the session: a new one, or for
// a resumed session its previous conversation, through session/load or
// else session/resume when the agent offers them. It returns the ACP
// session id and how the conversation was resumed ("" for a new one). A
// conversation the agent cannot reopen becomes a new one whose first
// prompt carries the transcript so far ("transcript"), with a
// runtime_warning when reopening failed.
func (rt *runtime) openACPSession(ctx context.Context, init *acp.InitializeResponse, h *agentHandler) (string, string, error) {
	prev := rt.resumeFrom
	caps := init.Capabilities()
	if prev == "" {
		ns, err := rt.client.NewSession(ctx, rt.workspace)
		return ns.SessionID, "", err
	}
	var err error
	how := ""
	switch {
	case caps.LoadSession:
		// The replayed history is in the log already.
		h.replaying.Store(true)
		how, err = "load", rt.client.LoadSession(ctx, prev, rt.workspace)
		h.replaying.Store(false)
	case caps.CanResume():
		how, err = "resume", rt.client.ResumeSession(ctx, prev, rt.workspace)
	}
	if how != "" && err == nil {
		return prev, how, nil
	}
	if err != nil {
		rt.mu.Lock()
		// The start goroutine is not one the monitor waits for: log only while the agent runs.
		if !rt.exited {
			rt.emit("", berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
				"the agent could not reopen the conversation (session/%s: %v): it starts a new one, given the transcript so far", how, err)})
		}
		rt.mu.Unlock()
	}
	ns, err := rt.client.NewSession(ctx, rt.workspace)
	if err != nil {
		return "", "", err
	}
	carry, terr := rt.m.transcriptPreamble(ctx, rt.id)
	if terr != nil {
		rt.logger.Warn("transcript for the new conversation", "err", terr)
	}
	rt.mu.Lock()
	rt.carry = carry
	rt.mu.Unlock()
	return ns.SessionID, "transcript", nil
}

// handshakeFailed stops a session whose agent did not complete the
// handshake; the monitor records it as startup_failed with the agent's
// stderr tail.
func (rt *runtime) handshakeFailed(ctx context.Context, step string, err error) error {
	msg := fmt.Sprintf("agent handshake failed at %s: %v", step, err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("agent did not answer %s within %s", step, rt.m.opts.Limits.HandshakeTimeout)
	case errors.Is(err, acp.ErrClosed) || strings.Contains(err.Error(), acp.ErrClosed.Error()):
		msg = fmt.Sprintf("agent exited during the handshake (%s)", step)
	}
	rt.requestStop(berth.StopStartupFailed, &berth.Failure{Kind: berth.FailHandshake, Message: msg})
	_, _ = rt.proc.Stop(ctx, rt.m.opts.Limits.StopGrace)
	<-rt.finished
	return nil
}

// failStart records a session that never got an agent running. It always
// ends the runtime, even when the store fails.
func (rt *runtime) failStart(ctx context.Context, f *berth.Failure) error {
	defer func() {
		rt.m.forget(rt)
		close(rt.ready)
		close(rt.finished)
	}()
	rt.finish(ctx, berth.StopStartupFailed, f)
	return nil
}
