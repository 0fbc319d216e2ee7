package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/pathx"

	live "github.com/berth-sh/berth/session/live"
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

// CreateSession implements berth.SessionService.
func (m *Manager) CreateSession(ctx context.Context, req berth.CreateRequest) (*berth.Session, error) {
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.inflight.Done()
	return m.create(ctx, req, nil, nil)
}

// create creates a session: a root, or with kid a child of kid.parent
// (children.go), its request already narrowed to what the parent has; with
// fork, a fork of a checkpoint (checkpoint.go).
func (m *Manager) create(ctx context.Context, req berth.CreateRequest, kid *spawn, fork *forkSpec) (*berth.Session, error) {
	began := time.Now()
	if kid != nil && filepath.IsAbs(req.Workspace) && !pathx.Within(resolvedPath(kid.parent.Workspace), filepath.Clean(req.Workspace)) {
		// Refused before the path is looked at: a sandboxed parent learns
		// nothing of the host's files from the answer, nor costs a walk.
		return nil, forbidden("workspace", "workspace: a child works in its parent's workspace or below it")
	}
	spec, provider, unisolated, err := m.validateCreate(&req)
	if err != nil {
		return nil, err
	}
	wtCommon, err := m.checkCreateOptions(ctx, &req, kid)
	if err != nil {
		return nil, err
	}
	if len(req.Mounts) > 0 && !provider.Capabilities().Binds {
		return nil, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("mounts are bound into a sandbox: sandbox %s binds nothing (use one that isolates)", provider.Name()),
			Details: map[string]any{"field": "mounts"}}
	}
	if kid != nil {
		if err := kid.checkResolved(&req, provider.Name()); err != nil {
			return nil, err
		}
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
	if kid != nil {
		network, netWarning = kid.network(spec, network, netWarning)
	}
	if err := checkMCPNetwork(req.MCPServers, provider.Name(), provider.Capabilities(), network); err != nil {
		return nil, err
	}
	kid.inheritMemory(&req, int(m.opts.Sandbox.Limits.MemoryBytes>>20))
	limits, limitWarning, err := m.sandboxLimits(&req, provider)
	if err != nil {
		return nil, err
	}
	if limits, err = kid.memory(limits, req.MemoryMB); err != nil {
		return nil, err
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
		RootID: id,
	}
	s.Sandbox.Limits = limits
	s.MCPServers = req.MCPServers
	s.BerthTools = req.BerthTools == nil || *req.BerthTools
	s.Mounts = req.Mounts
	kid.lineage(s)
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
	if err := mkdirs(m.homeDir(id), s.Workspace, s.ManagedWorkspace); err != nil {
		return nil, err
	}
	if s.ManagedWorkspace {
		// Stored real, as a user-given one: the sandbox opens it without
		// following links (a $BERTH_HOME reached through one).
		s.Workspace = resolvedPath(s.Workspace)
	}
	if req.FromSnapshot != "" {
		// A fork: the new workspace starts as the snapshot's copy.
		if err := m.restoreSnapshot(ctx, req.FromSnapshot, s.Workspace); err != nil {
			_ = os.RemoveAll(s.Workspace)
			return nil, err
		}
		unlinkWorktreeFile(s.Workspace)
	}
	var parent *berth.Session
	if kid != nil {
		parent = kid.parent
	}
	if err := m.prepareWorkspace(ctx, s, &req, wtCommon, parent); err != nil {
		_ = os.RemoveAll(m.sessionDir(id))
		return nil, err
	}
	defer func() {
		if !registered && s.Worktree != nil && s.Worktree.Owned {
			// Nothing stored owns the worktree: it goes with the create.
			_ = os.RemoveAll(s.Workspace)
			m.removeWorktree(ctx, s.Worktree)
		}
	}()
	if fork != nil {
		if err := m.fillFork(ctx, fork, s); err != nil {
			_ = os.RemoveAll(m.sessionDir(id))
			_ = os.RemoveAll(s.Workspace)
			return nil, err
		}
	}
	// A child is admitted under its parent's lock, from the count of its
	// live siblings to going live, so no spawn slips past a limit or a
	// stopping parent.
	unlock, err := kid.admit(s)
	if err != nil {
		_ = os.RemoveAll(m.sessionDir(id))
		return nil, err
	}
	ls := m.newLive(live.Config{Session: s, Spec: spec, Fork: fork.from()})
	var launch *live.Launching
	if m.opts.Shim != nil {
		// The agent's shim starts it while the session is stored: the
		// store's write is off the create's path. Nothing of the agent is
		// visible before the session is, and a daemon that dies in between
		// leaves a shim that no session owns, which the next one ends
		// (removeOrphanShims) as the shim itself does after
		// limits.orphan_timeout.
		launch = ls.Launch(ctx, provider)
	}
	if err := m.store.CreateSession(ctx, s); err != nil {
		ls.AbortLaunch(ctx, launch)
		unlock()
		_ = os.RemoveAll(m.sessionDir(id))
		if kid != nil && berth.IsCode(err, berth.EConflict) {
			// A retry with the same Idempotency-Key won the race.
			return kid.retried(ctx)
		}
		return nil, fmt.Errorf("store session: %w", err)
	}
	// A cluster node drives the session under its lease from its first
	// event on.
	if err := m.acquire(ctx, id); err != nil {
		ls.AbortLaunch(ctx, launch)
		unlock()
		_ = os.RemoveAll(m.sessionDir(id))
		if derr := m.store.DeleteSession(ctx, id); derr != nil {
			m.logger.Warn("remove a session whose lease was not taken", "session_id", id, "err", derr)
		}
		return nil, fmt.Errorf("take the session's lease: %w", err)
	}
	// Announced before anything else can change it, so session_created
	// comes first.
	ls.Publish(berth.ChangeSessionCreated)
	m.goLive(ls, true) // a new id: no other live session has it
	registered = true
	kid.started(s)
	unlock()

	ls.Emit("", berth.EventSessionCreated, map[string]any{
		"agent": spec.Name, "sandbox": s.Sandbox, "workspace": s.Workspace})
	if netWarning != "" {
		ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": netWarning})
	}
	if limitWarning != "" {
		ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": limitWarning})
	}
	if unisolated {
		ls.Emit("", berth.EventRuntimeWarning, map[string]any{
			"reason": "no sandbox provider with isolation works on this host: the agent runs without isolation (sandbox host)"})
	}

	if launch == nil {
		launch = ls.Launch(ctx, provider)
	}
	err = ls.Start(ctx, launch)
	m.opts.Observer.SessionCreated(provider.Name(), err == nil && ls.View().State == berth.StateActive, time.Since(began))
	if err != nil {
		if berth.IsCode(err, berth.EInvalid) {
			m.discardRefused(ctx, id)
		}
		return nil, err
	}
	// The answer's last_seq covers session_started: commit it first.
	if err := m.log.FlushSession(ctx, id); err != nil {
		ls.Logger().Warn("flush after create", "err", err)
	}
	out := ls.View()
	if strings.TrimSpace(req.Prompt) != "" && out.State == berth.StateActive {
		if _, err := m.Prompt(ctx, id, berth.PromptRequest{Text: req.Prompt}); err != nil {
			ls.Logger().Warn("first prompt not started", "err", err)
		}
		out = ls.View()
	}
	return out, nil
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
	if err := berth.ValidateName(req.Name); err != nil {
		return spec, nil, false, err
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
		// The session stores the real path: its sandbox opens it without
		// following links, so one planted later is refused there.
		real, err := resolveWorkspace(req.Workspace)
		if err != nil {
			return spec, nil, false, err
		}
		req.Workspace = real
		if err := m.checkNotDaemons(req.Workspace); err != nil {
			return spec, nil, false, err
		}
		// Not a directory people share (a child sharing its parent's
		// managed workspace is the daemon's own).
		if err := m.checkWorkspace(req.Workspace, "workspace"); err != nil {
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
	if len(req.Labels) > berth.MaxLabels {
		return spec, nil, false, berth.Errorf(berth.EInvalid, "at most %d labels", berth.MaxLabels)
	}
	for k := range req.Labels {
		if err := berth.ValidateLabelKey(k); err != nil {
			return spec, nil, false, err
		}
	}
	for k := range req.Env {
		if !validEnvName(k) {
			return spec, nil, false, berth.Errorf(berth.EInvalid, "env name %q is not valid", k)
		}
	}
	if err := berth.MCPServers(req.MCPServers).Validate(); err != nil {
		return spec, nil, false, err
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
	if !pathx.Within(home, real) {
		return nil
	}
	if managed := resolvedPath(m.workspacesDir()); pathx.Within(managed, real) && real != managed {
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
// to one without isolation.
func (m *Manager) pickSandbox(name string, network bool) (_ berth.SandboxProvider, unisolated bool, _ error) {
	pol := m.opts.Sandbox
	if network && !pol.AllowNetwork {
		return nil, false, berth.Errorf(berth.EForbidden, "network access is not allowed by [sandbox] allow_network")
	}
	if name == "" {
		name = pol.Default
	}
	if name == berth.SandboxAuto {
		if p := m.autoProvider(func(c berth.SandboxCapabilities) bool { return c.Preferred }); p != nil {
			return p, false, nil
		}
		if pol.RequireIsolation {
			return nil, false, berth.Errorf(berth.EUnavailable, "no sandbox with isolation works on this host and [sandbox] require_isolation is set")
		}
		p := m.autoProvider(func(c berth.SandboxCapabilities) bool { return c.Fallback })
		if p == nil {
			return nil, false, berth.Errorf(berth.EUnavailable, "no sandbox provider works on this host")
		}
		name, unisolated = p.Name(), p.Capabilities().Isolation == 0
	}
	if !slices.Contains(berth.SandboxProviders, name) {
		return nil, false, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("unknown sandbox provider %q", name),
			Details: map[string]any{"field": "sandbox"}}
	}
	p, ok := m.providers[name]
	if ok && !unisolated && p.Capabilities().Isolation == 0 && !pol.AllowHost {
		// Asked for by name; auto's fallback is require_isolation's to refuse.
		return nil, false, berth.Errorf(berth.EForbidden, "sandbox %s is not allowed by [sandbox] allow_host", name)
	}
	if !ok {
		return nil, false, berth.Errorf(berth.EUnavailable, "sandbox provider %s is not available in this build", name)
	}
	if err := m.available[name]; err != nil {
		return nil, false, berth.WrapError(berth.EUnavailable, err, "sandbox provider %s is not available: %s", name, berth.ErrorMessage(err))
	}
	return p, unisolated, nil
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
