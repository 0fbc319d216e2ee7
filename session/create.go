package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/pathx"
	"github.com/berth-sh/berth/internal/wsdir"

	live "github.com/berth-sh/berth/session/live"
	"github.com/berth-sh/berth/session/wsfiles"
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
	if err := m.set.enter(&m.inflight); err != nil {
		return nil, err
	}
	defer m.inflight.Done()
	return m.create(ctx, req, root{})
}

// create creates a session from origin from (a root, a child, a fork):
// the stages below, then its agent's start.
func (m *Manager) create(ctx context.Context, req berth.CreateRequest, from origin) (*berth.Session, error) {
	b := m.newBirth(from)
	b.req = req
	// The caller may hang up: once something is written, the session is
	// carried to a recorded state regardless.
	wctx := context.WithoutCancel(ctx)
	err := b.run(ctx,
		stage{"check", b.check},
		stage{"reserve", b.reserve},
		stage{"record", func(context.Context) error { b.record(); return nil }},
		stage{"workspace", func(context.Context) error { return b.workspace(wctx) }},
		stage{"admit", b.admit},
		stage{"launch", func(context.Context) error { b.launchEarly(wctx); return nil }},
		stage{"store", func(context.Context) error { return b.store(wctx) }},
		stage{"lease", func(context.Context) error { return b.lease(wctx) }},
		stage{"live", b.born},
	)
	if err != nil {
		return from.retry(wctx, err)
	}
	return b.start(wctx)
}

// check checks the request and resolves what it leaves open (the agent,
// the sandbox, the network, the limits) before anything is written.
func (b *birth) check(ctx context.Context) error {
	m, req := b.m, &b.req
	var err error
	if b.spec, b.provider, b.unisolated, err = b.validate(req); err != nil {
		return err
	}
	b.needsFetch()
	if b.wtCommon, err = m.place.checkCreateOptions(ctx, req); err != nil {
		return err
	}
	if len(req.Mounts) > 0 && !b.provider.Capabilities().Binds {
		return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("mounts are bound into a sandbox: sandbox %s binds nothing (use one that isolates)", b.provider.Name()),
			Details: map[string]any{"field": "mounts"}}
	}
	// A session that does not ask gets [sandbox] network, or else the
	// network when its agent needs it, when policy allows; when policy
	// does not, it runs without and is told why.
	if def := m.opts.Sandbox.Network; req.Network.IsZero() && (b.spec.Network || !def.IsZero()) {
		if def.IsZero() {
			def = berth.NetworkOf(true)
		}
		if checkAllowList(def, b.provider.Name(), b.provider.Capabilities()) != nil {
			b.warn(fmt.Sprintf("[sandbox] network is an allow list, which sandbox %s cannot enforce: the session runs without network", b.provider.Name()))
		} else if m.opts.Sandbox.AllowNetwork {
			req.Network = def
		} else if b.spec.Network {
			b.warn(fmt.Sprintf("agent %s needs the network to reach its model, but [sandbox] allow_network is false: it runs without network", b.spec.Name))
		}
	}
	limits, limitWarning, err := m.place.sandboxLimits(req, b.provider)
	if err != nil {
		return err
	}
	b.limits = limits
	if err := b.from.narrow(b); err != nil {
		return err
	}
	b.warn(limitWarning)
	if b.unisolated {
		b.warn("no sandbox provider with isolation works on this host: the agent runs without isolation (sandbox host)")
	}
	if err := m.models.checkModels(req.Models); err != nil {
		return err
	}
	if err := checkAllowList(req.Network, b.provider.Name(), b.provider.Capabilities()); err != nil {
		return err
	}
	return checkMCPNetwork(req.MCPServers, b.provider.Name(), b.provider.Capabilities(), req.Network.Mode != berth.NetworkNone)
}

// record makes the new session's record.
func (b *birth) record() {
	req := &b.req
	now := time.Now().UTC()
	id := ids.New("ses")
	s := &berth.Session{
		ID: id, Name: req.Name, Agent: b.spec.Name, State: berth.StateStarting, Badge: berth.BadgeStarting,
		Workspace: req.Workspace, Sandbox: berth.SandboxSpec{Provider: b.provider.Name(), Network: req.Network.Open(), NetworkPolicy: allowList(req.Network), Limits: b.limits},
		PermissionMode: req.PermissionMode, Labels: req.Labels, Env: req.Env,
		CreatedAt: now, UpdatedAt: now, LastActivityAt: now,
		TTLSeconds: req.TTLSeconds, IdleTimeoutSeconds: req.IdleTimeoutSeconds,
		RootID: id, MCPServers: req.MCPServers, BerthTools: req.BerthTools == nil || *req.BerthTools, Mounts: req.Mounts,
		Models:     cloneModels(req.Models),
		MaxCostUSD: req.MaxCostUSD, MaxTokens: req.MaxTokens,
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	if req.TTLSeconds > 0 {
		exp := now.Add(time.Duration(req.TTLSeconds) * time.Second)
		s.ExpiresAt = &exp
	}
	if s.Workspace == "" {
		s.Workspace = filepath.Join(b.m.place.workspacesDir(), id)
		s.ManagedWorkspace = true
	}
	b.from.shape(s)
	b.s = s
}

// workspace makes the session's private HOME and its workspace what the
// request asks: a managed one (from a snapshot, when asked), a worktree,
// what the origin fills in, then the files.
func (b *birth) workspace(ctx context.Context) error {
	m, s, req := b.m, b.s, &b.req
	tools := ""
	if s.BerthTools && m.tools.enabled() {
		// The berth tools' directory is made beside the others, not after
		// them: their grant finds it there.
		tools = m.tools.dir(s.ID)
	}
	if err := mkdirs(m.place.homeDir(s.ID), s.Workspace, s.ManagedWorkspace, tools); err != nil {
		return err
	}
	b.onFail(func() { _ = os.RemoveAll(m.place.sessionDir(s.ID)) })
	if tools != "" {
		// Empty until the grant: removed with a create that ends first.
		b.onFail(func() { _ = os.Remove(tools) })
	}
	if s.ManagedWorkspace {
		ws := s.Workspace
		b.onFail(func() { _ = os.RemoveAll(ws) })
		// Stored real, as a user-given one: the sandbox opens it without
		// following links (a $BERTH_HOME reached through one).
		s.Workspace = resolvedPath(s.Workspace)
	}
	if req.FromSnapshot != "" {
		// A fork: the new workspace starts as the snapshot's copy.
		if err := b.restoreSnapshot(ctx, req.FromSnapshot, s.Workspace); err != nil {
			return err
		}
		unlinkWorktreeFile(s.Workspace)
	}
	if req.Worktree != nil {
		if err := m.place.addWorktree(ctx, s, req.Worktree, b.wtCommon); err != nil {
			return err
		}
		// Nothing stored owns the worktree yet: it goes with the create.
		b.onFail(func() {
			_ = os.RemoveAll(s.Workspace)
			m.place.removeWorktree(ctx, s.Worktree)
		})
	}
	if err := b.from.fill(ctx, b); err != nil {
		return err
	}
	return wsfiles.Write(s.Workspace, req.Files)
}

// admit lets the session in among its origin's (a child among its
// parent's live children), under a lock held until it is live.
func (b *birth) admit(context.Context) error {
	unlock, err := b.from.admit(b.s)
	if err != nil {
		return err
	}
	b.unlock = unlock
	b.onFail(unlock)
	return nil
}

// launchEarly makes the live session and, with shims, starts its agent
// while the session is stored: the store's write is off the create's
// path. Nothing of the agent is visible before the session is, and a
// daemon that dies in between leaves a shim that no session owns, which
// the next one ends (removeOrphanShims) as the shim itself does after
// limits.orphan_timeout.
func (b *birth) launchEarly(ctx context.Context) {
	b.ls = b.m.newLive(live.Config{Session: b.s, Spec: b.spec, Fork: b.fork})
	if b.m.opts.Shim == nil || b.fetch != "" {
		// Launched by start: once the session's log can tell the fetch.
		return
	}
	b.launch = b.ls.Launch(ctx, b.provider)
	b.onFail(func() { b.ls.AbortLaunch(ctx, b.launch) })
}

// store writes the session's record.
func (b *birth) store(ctx context.Context) error {
	if err := b.m.store.CreateSession(ctx, b.s); err != nil {
		err = fmt.Errorf("store session: %w", err)
		if berth.IsCode(err, berth.EConflict) {
			return duplicateError{err}
		}
		return err
	}
	id := b.s.ID
	b.onFail(func() {
		if err := b.m.store.DeleteSession(ctx, id); err != nil {
			b.m.logger.Warn("remove a session not started", "session_id", id, "err", err)
		}
	})
	return nil
}

// duplicateError is the store's refusal of a new session's record: one
// with its key is there already (a child's retry stored first).
type duplicateError struct{ error }

func (e duplicateError) Unwrap() error { return e.error }

// lease takes the session's lease: a cluster node drives the session
// under it from its first event on.
func (b *birth) lease(ctx context.Context) error {
	id := b.s.ID
	if err := b.m.leases.acquire(ctx, id); err != nil {
		return fmt.Errorf("take the session's lease: %w", err)
	}
	b.onFail(func() { b.m.leases.release(ctx, id) })
	return nil
}

// born makes the session live: announced first, so session_created
// comes before any change of it, then in the manager's set, then among
// its origin's.
func (b *birth) born(context.Context) error {
	b.ls.Publish(berth.ChangeSessionCreated)
	b.goLive() // a new id: no other live session has it
	b.from.born(b.s)
	b.unlock()
	return nil
}

// start begins the live session's log and starts its agent; the answer is
// the session as it is then, after the request's first prompt if any.
func (b *birth) start(ctx context.Context) (*berth.Session, error) {
	m, ls, s := b.m, b.ls, b.s
	ls.Emit("", berth.EventSessionCreated, map[string]any{
		"agent": b.spec.Name, "sandbox": s.Sandbox, "workspace": s.Workspace})
	for _, w := range b.warnings {
		ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": w})
	}
	if b.launch == nil {
		b.launch = b.launchAgent(ctx)
	}
	err := ls.Start(ctx, b.launch)
	m.opts.Observer.SessionCreated(b.provider.Name(), err == nil && ls.View().State == berth.StateActive, time.Since(b.began))
	if err != nil {
		if berth.IsCode(err, berth.EInvalid) {
			b.discardRefused(ctx, s.ID)
		}
		return nil, err
	}
	// The answer's last_seq covers session_started: commit it first.
	if err := m.log.FlushSession(ctx, s.ID); err != nil {
		ls.Logger().Warn("flush after create", "err", err)
	}
	out := ls.View()
	if strings.TrimSpace(b.req.Prompt) != "" && out.State == berth.StateActive {
		if _, err := m.Prompt(ctx, s.ID, berth.PromptRequest{Text: b.req.Prompt}); err != nil {
			ls.Logger().Warn("first prompt not started", "err", err)
		}
		out = ls.View()
	}
	return out, nil
}

// validate checks a create request and fills its defaults. Nothing
// is written before it passes.
func (b *birth) validate(req *berth.CreateRequest) (berth.AgentSpec, berth.SandboxProvider, bool, error) {
	if strings.TrimSpace(req.Agent) == "" {
		return berth.AgentSpec{}, nil, false, berth.Errorf(berth.EInvalid, "agent is required")
	}
	spec, ok := b.m.opts.Catalog.Get(req.Agent)
	if !ok {
		// The catalog's names, so that the user need not ask again.
		var names []string
		for _, a := range b.m.opts.Catalog.List() {
			names = append(names, a.Name)
		}
		return spec, nil, false, &berth.Error{Code: berth.EInvalid,
			Message: fmt.Sprintf("unknown agent %q: this daemon has %s", req.Agent, strings.Join(names, ", ")),
			Details: map[string]any{"field": "agent", "agents": names}}
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
		real, err := wsdir.Resolve(req.Workspace)
		if err != nil {
			return spec, nil, false, err
		}
		req.Workspace = real
		if err := b.m.place.checkNotDaemons(req.Workspace); err != nil {
			return spec, nil, false, err
		}
		// Not a directory people share (a child sharing its parent's
		// managed workspace is the daemon's own).
		if err := b.m.place.checkWorkspace(req.Workspace, "workspace"); err != nil {
			return spec, nil, false, err
		}
	}
	if err := req.ValidateTimes(); err != nil {
		return spec, nil, false, err
	}
	if err := req.ValidateBudget(); err != nil {
		return spec, nil, false, err
	}
	if req.FromSnapshot != "" {
		if req.Workspace != "" {
			return spec, nil, false, &berth.Error{Code: berth.EInvalid, Message: "from_snapshot restores into a new managed workspace: omit workspace",
				Details: map[string]any{"field": "workspace"}}
		}
		if b.m.opts.Snapshots == nil {
			return spec, nil, false, berth.Errorf(berth.EInvalid, "snapshots are not configured")
		}
		if _, err := b.m.opts.Snapshots.Get(context.Background(), req.FromSnapshot); err != nil {
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
	provider, unisolated, err := b.m.place.pickSandbox(req.Sandbox, req.Network.Mode != berth.NetworkNone)
	return spec, provider, unisolated, err
}

// checkNotDaemons refuses a workspace that is the daemon's home or lies
// inside it (its socket, database, run directory, other sessions' homes
// would be the agent's), but for a managed workspace under
// $BERTH_HOME/workspaces/ (a child sharing its parent's). Paths are
// compared with their symbolic links resolved. A workspace that contains
// the home is allowed: the sandbox covers the home there
// (SandboxConfig.Hide).
func (pl *placement) checkNotDaemons(ws string) error {
	if pl.m.opts.Home == "" {
		return nil
	}
	real := resolvedPath(ws)
	home := resolvedPath(pl.m.opts.Home)
	if !pathx.Within(home, real) {
		return nil
	}
	if managed := pl.ownPaths().workspaces; pathx.Within(managed, real) && real != managed {
		return nil
	}
	return &berth.Error{Code: berth.EInvalid, Message: "workspace is the daemon's home or lies inside it: the agent would reach the daemon's socket and database; pick another directory, or omit workspace for a managed one",
		Details: map[string]any{"field": "workspace"}}
}

// hidden is what no sandbox may see: the daemon's home, and Options.Hidden.
func (pl *placement) hidden() []string { return pl.ownPaths().hidden }

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
func (pl *placement) pickSandbox(name string, network bool) (_ berth.SandboxProvider, unisolated bool, _ error) {
	pol := pl.m.opts.Sandbox
	if network && !pol.AllowNetwork {
		return nil, false, berth.Errorf(berth.EForbidden, "network access is not allowed by [sandbox] allow_network")
	}
	if name == "" {
		name = pol.Default
	}
	if name == berth.SandboxAuto {
		if p := pl.autoProvider(func(c berth.SandboxCapabilities) bool { return c.Preferred }); p != nil {
			return p, false, nil
		}
		if pol.RequireIsolation {
			return nil, false, berth.Errorf(berth.EUnavailable, "no sandbox with isolation works on this host and [sandbox] require_isolation is set")
		}
		p := pl.autoProvider(func(c berth.SandboxCapabilities) bool { return c.Fallback })
		if p == nil {
			return nil, false, berth.Errorf(berth.EUnavailable, "no sandbox provider works on this host")
		}
		name, unisolated = p.Name(), p.Capabilities().Isolation == 0
	}
	if !slices.Contains(berth.SandboxProviders, name) {
		return nil, false, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("unknown sandbox provider %q", name),
			Details: map[string]any{"field": "sandbox"}}
	}
	p, ok := pl.m.providers[name]
	if ok && !unisolated && p.Capabilities().Isolation == 0 && !pol.AllowHost {
		// Asked for by name; auto's fallback is require_isolation's to refuse.
		return nil, false, berth.Errorf(berth.EForbidden, "sandbox %s is not allowed by [sandbox] allow_host", name)
	}
	if !ok {
		return nil, false, berth.Errorf(berth.EUnavailable, "sandbox provider %s is not available in this build", name)
	}
	if err := pl.m.availability(name); err != nil {
		return nil, false, berth.WrapError(berth.EUnavailable, err, "sandbox provider %s is not available: %s", name, berth.ErrorMessage(err))
	}
	return p, unisolated, nil
}

// mkdirs creates the session's private HOME, when managed its
// workspace, and when set the berth tools' directory: at once, as they
// lie apart and each is a metadata write of a tenth of a millisecond or
// more. The tools' directory's error is its grant's to report.
func mkdirs(home, workspace string, managed bool, tools string) error {
	var wsErr error
	var wg sync.WaitGroup
	if managed {
		wg.Go(func() { wsErr = os.MkdirAll(workspace, 0o755) })
	}
	if tools != "" {
		wg.Go(func() { _ = os.Mkdir(tools, 0o700) })
	}
	err := os.MkdirAll(home, 0o700)
	wg.Wait()
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "create session home")
	}
	if wsErr != nil {
		return berth.WrapError(berth.EInternal, wsErr, "create workspace")
	}
	return nil
}
