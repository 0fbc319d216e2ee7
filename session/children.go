package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"

	live "github.com/berth-sh/berth/session/live"
)

// Child sessions (docs/api.md, "Children"). A child is created through its parent
// (SpawnChild) and can never be given more than the parent has: its
// request is narrowed, fail-closed, before anything is written. It is
// admitted under its parent's tree lock, where its live siblings are
// counted and where the parent, once it stops, refuses any more; the
// parent's monitor stops every live child (parent_stopped) before it logs
// its own session_stopped, so the child_stopped events land in the
// parent's log first and a tree never outlives its root. The supervisor
// and the boot pass stop any child whose parent is not live (a parent
// stopped while the daemon was down, a resume that raced a stop).

// Default child limits (docs/api.md, "Children").
const (
	defaultMaxChildren = 5
	defaultMaxDepth    = 1
	// maxSpawnKey bounds an Idempotency-Key.
	maxSpawnKey = 255
)

// trees is the manager's side of its sessions' trees: who is whose
// child, the admission of children, a parent's stop taking its children
// along. It is the live sessions' live.Tree.
type trees struct {
	m *Manager
	// locks serialise the admission of a parent's children against each
	// other and against the parent's stop, keyed by the parent's id (see
	// treeState in session/live).
	locks sessionLocks
}

// StopChildren stops the live children of session id, which is closing
// (live.Tree).
func (t *trees) StopChildren(ctx context.Context, id string) {
	m := t.m
	// The parent is closing: a child being admitted is live once this
	// lock is ours, and no other is admitted after.
	t.locks.lock(id, true)()
	if m.set.isClosing() {
		return
	}
	var wg sync.WaitGroup
	for _, c := range t.liveChildrenOf(id) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Stop(ctx, berth.StopParentStopped, nil)
		}()
	}
	wg.Wait()
}

// ParentLive reports whether session id is live here (live.Tree).
func (t *trees) ParentLive(id string) bool { return t.m.set.liveOf(id) != nil }

// ToParent logs an event about a child in its parent's log (live.Tree).
func (t *trees) ToParent(parentID, typ string, data map[string]any) {
	t.toParent(parentID, typ, data)
}

// permRank orders the permission modes from the strictest: a child's mode
// may not rank above its parent's.
var permRank = map[string]int{
	berth.PermDenyAll:      0,
	berth.PermAsk:          1,
	berth.PermApproveReads: 2,
	berth.PermApproveAll:   3,
}

// spawn is one child being created: its parent as it was when the spawn
// began, and its Idempotency-Key.
type spawn struct {
	m      *Manager
	parent *berth.Session
	prt    *live.Session
	key    string
	hash   string
}

// SpawnChild implements berth.SessionService; it is also the entry point
// of the agents' own berth MCP server.
func (m *Manager) SpawnChild(ctx context.Context, parentID string, req berth.CreateRequest, idemKey string) (*berth.Session, error) {
	if err := m.set.enter(&m.inflight); err != nil {
		return nil, err
	}
	defer m.inflight.Done()
	if req.TTLSeconds <= 0 {
		return nil, &berth.Error{Code: berth.EInvalid, Message: "ttl_seconds is required for a child session",
			Details: map[string]any{"field": "ttl_seconds"}}
	}
	if err := req.ValidateTimes(); err != nil {
		return nil, err
	}
	if err := req.ValidateBudget(); err != nil {
		return nil, err
	}
	if len(idemKey) > maxSpawnKey || strings.ContainsFunc(idemKey, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		return nil, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("Idempotency-Key must be at most %d printable ASCII characters", maxSpawnKey),
			Details: map[string]any{"header": "Idempotency-Key"}}
	}
	kid := &spawn{m: m, key: idemKey, hash: requestDigest(req), prt: m.set.liveOf(parentID)}
	if kid.prt != nil {
		kid.parent = kid.prt.View()
	} else {
		p, err := m.store.GetSession(ctx, parentID)
		if err != nil {
			return nil, err
		}
		kid.parent = p
	}
	if idemKey != "" {
		// A retry answers the child the first call made, whatever became
		// of the parent and the limits since.
		if s, err := kid.find(ctx); s != nil || err != nil {
			return s, err
		}
	}
	if kid.prt == nil || kid.parent.State != berth.StateActive {
		return nil, &berth.Error{Code: berth.EConflict, Message: fmt.Sprintf("the parent session is %s: only an active session spawns children", kid.parent.State),
			Details: map[string]any{"parent_id": parentID, "state": kid.parent.State}}
	}
	if maxDepth := m.trees.maxDepth(); kid.parent.Depth+1 > maxDepth {
		return nil, &berth.Error{Code: berth.EConflict, Message: fmt.Sprintf("limits.max_depth (%d) reached: a session at depth %d cannot spawn", maxDepth, kid.parent.Depth),
			Details: map[string]any{"limit": "max_depth", "max_depth": maxDepth, "depth": kid.parent.Depth + 1}}
	}
	if err := kid.narrowRequest(&req); err != nil {
		return nil, err
	}
	return m.create(ctx, req, kid)
}

// maxChildren is limits.max_children (a negative limit allows none).
func (t *trees) maxChildren() int {
	switch n := t.m.opts.Limits.MaxChildren; {
	case n < 0:
		return 0
	case n == 0:
		return defaultMaxChildren
	default:
		return n
	}
}

// maxDepth is limits.max_depth (a negative limit allows no children).
func (t *trees) maxDepth() int {
	switch n := t.m.opts.Limits.MaxDepth; {
	case n < 0:
		return 0
	case n == 0:
		return defaultMaxDepth
	default:
		return n
	}
}

// requestDigest is a digest of a spawn's body, so that a retry with the
// same Idempotency-Key and another body is told apart.
func requestDigest(req berth.CreateRequest) string {
	// encoding/json writes map keys sorted: equal bodies, equal bytes.
	b, _ := json.Marshal(req)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// forbidden is the 403 of a child asking for more than its parent has.
func forbidden(field, msg string) error {
	return &berth.Error{Code: berth.EForbidden, Message: msg, Details: map[string]any{"field": field}}
}

// narrowRequest fills the child's defaults from its parent and refuses,
// before anything is written, whatever would give the child more than the parent
// has: a looser permission mode, network, a weaker sandbox, env or a
// workspace the parent was not given, another session's snapshot.
func (k *spawn) narrowRequest(req *berth.CreateRequest) error {
	p := k.parent
	if req.Agent == "" {
		req.Agent = p.Agent
	}
	if err := k.narrowAgent(req.Agent); err != nil {
		return err
	}
	if req.PermissionMode == "" {
		req.PermissionMode = p.PermissionMode
	}
	if r, ok := permRank[req.PermissionMode]; ok && r > permRank[p.PermissionMode] {
		return forbidden("permission_mode", fmt.Sprintf("permission_mode %s is looser than the parent's %s", req.PermissionMode, p.PermissionMode))
	}
	if err := berth.NetworkNarrower(p.Sandbox.PolicyOf(), req.Network); err != nil {
		return err
	}
	if req.Sandbox == "" {
		req.Sandbox = p.Sandbox.Provider
	}
	if _, ok := k.m.providers[req.Sandbox]; ok && k.m.place.capsOf(req.Sandbox).Isolation < k.m.place.capsOf(p.Sandbox.Provider).Isolation {
		return forbidden("sandbox", fmt.Sprintf("sandbox %s is weaker than the parent's %s", req.Sandbox, p.Sandbox.Provider))
	}
	var extra []string
	for key := range req.Env {
		if _, ok := p.Env[key]; !ok {
			extra = append(extra, key)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return forbidden("env", fmt.Sprintf("env %s: the parent session was not given it", strings.Join(extra, ", ")))
	}
	// The child inherits the parent's env, the values it names overriding.
	env := make(map[string]string, len(p.Env))
	for key, v := range p.Env {
		env[key] = v
	}
	for key, v := range req.Env {
		env[key] = v
	}
	if len(env) > 0 {
		req.Env = env
	}
	if req.FromSnapshot != "" {
		return forbidden("from_snapshot", "from_snapshot: a child works in its parent's workspace, not in a snapshot of another session's")
	}
	if req.Workspace == "" {
		req.Workspace = p.Workspace
	}
	if filepath.IsAbs(req.Workspace) && !pathx.Within(resolvedPath(p.Workspace), filepath.Clean(req.Workspace)) {
		// Refused before the path is looked at: a sandboxed parent learns
		// nothing of the host's files from the answer, nor costs a walk.
		return forbidden("workspace", "workspace: a child works in its parent's workspace or below it")
	}
	if req.Worktree != nil {
		return forbidden("worktree", "worktree: a child works in its parent's workspace")
	}
	if req.Mounts == nil {
		req.Mounts = slices.Clone(p.Mounts)
	}
	for _, name := range req.Mounts {
		if !slices.Contains(p.Mounts, name) {
			return forbidden("mounts", "mounts: the parent session was not given mount "+name)
		}
	}
	if err := k.inheritMemory(req); err != nil {
		return err
	}
	return k.narrowMCP(req)
}

// narrowAgent refuses a child agent that would be given more than the
// parent's agent is: the credentials the catalog passes it (pass_env
// variables, home_files, env). The same agent is
// always allowed. Without this a session could spawn a child of another
// agent and read that agent's API keys through it.
func (k *spawn) narrowAgent(name string) error {
	if name == k.parent.Agent {
		return nil
	}
	child, ok := k.m.opts.Catalog.Get(name)
	if !ok {
		// Create refuses an unknown agent with its own error.
		return nil
	}
	parent, ok := k.m.opts.Catalog.Get(k.parent.Agent)
	if !ok {
		return forbidden("agent", fmt.Sprintf("agent %s: the parent's agent %s is no longer in the catalog", name, k.parent.Agent))
	}
	for _, v := range child.PassEnv {
		if !slices.Contains(parent.PassEnv, v) {
			return forbidden("agent", fmt.Sprintf("agent %s is passed %s, which the parent's agent %s is not", name, v, k.parent.Agent))
		}
	}
	for _, f := range child.HomeFiles {
		if !slices.Contains(parent.HomeFiles, f) {
			return forbidden("agent", fmt.Sprintf("agent %s is given ~/%s, which the parent's agent %s is not", name, f, k.parent.Agent))
		}
	}
	for key, v := range child.Env {
		if pv, ok := parent.Env[key]; !ok || pv != v {
			return forbidden("agent", fmt.Sprintf("agent %s is given env %s by the catalog, which the parent's agent %s is not", name, key, k.parent.Agent))
		}
	}
	// An agent that needs the network runs without it under a parent
	// that has none (the session's network is narrowed, not the agent).
	return nil
}

// narrowMCP refuses MCP servers the parent was not given, each compared
// by its whole definition (command line, URL, env and header values). A
// child that names none (mcp_servers omitted) inherits the parent's; an
// empty list gives it none.
func (k *spawn) narrowMCP(req *berth.CreateRequest) error {
	if req.MCPServers == nil {
		req.MCPServers = slices.Clone(k.parent.MCPServers)
		return nil
	}
	for i, s := range req.MCPServers {
		if !k.parent.MCPServers.Contains(s) {
			return forbidden(fmt.Sprintf("mcp_servers[%d]", i),
				fmt.Sprintf("mcp_servers[%d] (%s): the parent session was not given this server", i, s.Name))
		}
	}
	return nil
}

// narrow checks what the create resolved (origin): the real workspace
// must lie within the parent's, the provider "auto" picked must not be
// weaker than the parent's, and the child has no network nor memory its
// parent has not, whatever its agent would be given by default.
func (k *spawn) narrow(b *birth) error {
	req, p := &b.req, k.parent
	if !pathx.Within(resolvedPath(p.Workspace), req.Workspace) {
		return forbidden("workspace", "workspace: a child works in its parent's workspace or below it")
	}
	// A child's sandbox may not isolate less than its parent's.
	if k.m.place.capsOf(b.provider.Name()).Isolation < k.m.place.capsOf(p.Sandbox.Provider).Isolation {
		return forbidden("sandbox", fmt.Sprintf("sandbox %s is weaker than the parent's %s", b.provider.Name(), p.Sandbox.Provider))
	}
	if berth.NetworkNarrower(p.Sandbox.PolicyOf(), req.Network) != nil {
		req.Network = berth.NetworkPolicy{}
		if b.spec.Network {
			why := "has none"
			if pm := p.Sandbox.PolicyOf().Mode; pm != berth.NetworkNone {
				why = "has a narrower one (" + pm.String() + ")"
			}
			b.warn(fmt.Sprintf("agent %s needs the network to reach its model, but its parent session %s: it runs without network", b.spec.Name, why))
		}
	}
	// A default above the parent's memory limit gets the parent's.
	if mb := p.Sandbox.Limits.MemoryMB; mb > 0 && b.limits.MemoryMB > mb {
		b.limits.MemoryMB = mb
	}
	return nil
}

// shape records the child's place in its tree (origin).
func (k *spawn) shape(s *berth.Session) {
	s.ParentID, s.RootID, s.Depth = k.parent.ID, k.parent.RootID, k.parent.Depth+1
	if s.RootID == "" {
		s.RootID = k.parent.ID
	}
	s.SpawnKey, s.SpawnHash = k.key, k.hash
	// A parent without the berth tools has children without them.
	s.BerthTools = s.BerthTools && k.parent.BerthTools
	// A child that picks no upstreams calls its parent's.
	if s.Models == nil {
		s.Models = cloneModels(k.parent.Models)
	}
	if s.ExpiresAt == nil {
		// SpawnChild requires a TTL; this keeps a child without one impossible.
		exp := s.CreatedAt.Add(time.Hour)
		s.ExpiresAt = &exp
	}
}

// fill gives a child in its parent's worktree that worktree, not owned
// (origin).
func (k *spawn) fill(_ context.Context, b *birth) error {
	if w := k.parent.Worktree; w != nil {
		c := *w
		c.Owned = false
		b.s.Worktree = &c
	}
	return nil
}

// admit takes the parent's tree lock and checks that the parent still
// admits children and that limits.max_children leaves room; the caller
// stores the child and makes it live before it calls the returned unlock
// (origin).
func (k *spawn) admit(*berth.Session) (func(), error) {
	unlock := k.m.trees.locks.lock(k.parent.ID, true)
	if k.prt.Closing() {
		unlock()
		return nil, &berth.Error{Code: berth.EConflict, Message: "the parent session is stopping: it spawns no more children",
			Details: map[string]any{"parent_id": k.parent.ID}}
	}
	limit := k.m.trees.maxChildren()
	if n := len(k.m.trees.liveChildrenOf(k.parent.ID)); n >= limit {
		unlock()
		return nil, &berth.Error{Code: berth.EConflict, Message: fmt.Sprintf("limits.max_children (%d) reached: the parent has %d live children", limit, n),
			Details: map[string]any{"limit": "max_children", "max_children": limit, "live_children": n}}
	}
	return unlock, nil
}

// born logs child_started in the parent's log (origin).
func (k *spawn) born(s *berth.Session) {
	k.m.trees.toParent(s.ParentID, berth.EventChildStarted, map[string]any{"child_id": s.ID, "agent": s.Agent, "name": s.Name})
}

// find returns the child spawned with k's key, nil when there is none.
// EConflict when it was spawned with another body.
func (k *spawn) find(ctx context.Context) (*berth.Session, error) {
	page, err := k.m.store.ListSessions(ctx, berth.SessionFilter{Parent: k.parent.ID, SpawnKey: k.key, Limit: 1})
	if err != nil || len(page.Sessions) == 0 {
		return nil, err
	}
	s := page.Sessions[0]
	if s.SpawnHash != k.hash {
		return nil, &berth.Error{Code: berth.EConflict, Message: "Idempotency-Key was used for another child with a different body",
			Details: map[string]any{"header": "Idempotency-Key", "child_id": s.ID}}
	}
	return k.m.GetSession(ctx, s.ID)
}

// retry answers a spawn whose record the store refused: one with its key
// was stored first by a concurrent retry, and is the answer (origin).
func (k *spawn) retry(ctx context.Context, err error) (*berth.Session, error) {
	if _, dup := errors.AsType[duplicateError](err); !dup {
		return nil, err
	}
	s, err := k.find(ctx)
	if err == nil && s == nil {
		err = berth.Errorf(berth.EConflict, "the child could not be stored")
	}
	return s, err
}

// liveChildrenOf returns the live sessions whose parent is parentID.
func (t *trees) liveChildrenOf(parentID string) []*live.Session {
	return t.m.set.childrenOf(parentID)
}

// toParent logs an event about a child in its parent's log, while the
// parent is live and has not logged its session_stopped yet; otherwise
// the event is dropped (the parent's log ends with session_stopped).
func (t *trees) toParent(parentID, typ string, data map[string]any) {
	t.toLive(parentID, typ, data)
}

// toLive logs an event in a live session's log, tagged with its turn in
// flight, unless the log takes nothing more (the session is stopping). It
// reports whether it did.
func (t *trees) toLive(id, typ string, data map[string]any) bool {
	ls := t.m.set.liveOf(id)
	return ls != nil && ls.LogAbout(typ, data)
}

// lastTurnText is the text of the session's last turn that has any, up to
// maxTurnText, and the stop reason of its last turn that ended; read from
// the log a turn at a time.
func (tr *transcripts) lastTurnText(ctx context.Context, id string) (text, stopReason string, err error) {
	var last *berth.TranscriptTurn
	err = tr.m.TranscriptEach(ctx, id, func(t *berth.TranscriptTurn) error {
		if t.Text != "" || t.Long != nil {
			last = &berth.TranscriptTurn{Text: t.Text, Long: t.Long}
		}
		if t.StopReason != "" {
			stopReason = t.StopReason
		}
		return nil
	})
	if err != nil || last == nil {
		return "", stopReason, err
	}
	if last.Long != nil {
		text, err = last.Long.Head(ctx, live.MaxTurnText)
		return text, stopReason, err
	}
	return last.Text, stopReason, nil
}

// orphaned reports whether a live child's parent is neither live here nor
// live in the store (another node's): its tree is gone, so it stops.
func (t *trees) orphaned(ctx context.Context, ls *live.Session) bool {
	parentID := ls.ParentID()
	if parentID == "" {
		return false
	}
	if prt := t.m.set.liveOf(parentID); prt != nil {
		return false
	}
	p, err := t.m.store.GetSession(ctx, parentID)
	if isNotFound(err) {
		return true
	}
	return err == nil && !p.State.Live()
}

// stopOrphans stops, in the background, every live child whose parent is
// not live: at boot (a parent stopped while the daemon was down); the
// supervisor's ticks look at the sessions they look at (a resume that
// raced its parent's stop).
func (t *trees) stopOrphans(ctx context.Context) { t.stopOrphansOf(ctx, t.m.set.all()) }

// stopOrphansOf is stopOrphans for the live sessions given.
func (t *trees) stopOrphansOf(ctx context.Context, sessions []*live.Session) {
	for _, ls := range sessions {
		if ls.Closing() {
			continue
		}
		if t.orphaned(ctx, ls) {
			t.m.supervisor.reap(ls, berth.StopParentStopped)
		}
	}
}

// checkParentLive refuses to resume a child whose parent is not active
// (its tree is over; the parent may even be deleted), or that
// limits.max_children has no room for.
func (t *trees) checkParentLive(ctx context.Context, s *berth.Session) error {
	if s.ParentID == "" {
		return nil
	}
	if prt := t.m.set.liveOf(s.ParentID); prt != nil && !prt.Closing() {
		if limit, n := t.maxChildren(), len(t.liveChildrenOf(s.ParentID)); n >= limit {
			return &berth.Error{Code: berth.EConflict, Message: fmt.Sprintf("limits.max_children (%d) reached: the parent has %d live children", limit, n),
				Details: map[string]any{"limit": "max_children", "max_children": limit, "live_children": n}}
		}
		return nil
	}
	return &berth.Error{Code: berth.EConflict, Message: "the parent session is not active: resume the parent first, then spawn or resume its children",
		Details: map[string]any{"parent_id": s.ParentID}}
}

// maxTreeWalk bounds a walk up a tree: far past limits.max_depth (16 at
// most), so a corrupt store cannot loop it.
const maxTreeWalk = 64

// InSubtree reports whether the session id is ancestor or one of its
// descendants: the check the agents' berth MCP server makes before it
// acts for ancestor on id. ENotFound when id is absent.
func (m *Manager) InSubtree(ctx context.Context, ancestor, id string) (bool, error) {
	s, err := m.GetSession(ctx, id)
	if err != nil {
		return false, err
	}
	for range maxTreeWalk {
		if s.ID == ancestor {
			return true, nil
		}
		if s.ParentID == "" {
			return false, nil
		}
		if s, err = m.GetSession(ctx, s.ParentID); err != nil {
			if isNotFound(err) {
				// The chain breaks at a deleted parent.
				return false, nil
			}
			return false, err
		}
	}
	return false, nil
}

// deleteChildren deletes every child of a session being deleted, each
// with its own children first. They are stopped already: the parent's
// stop stopped them.
func (t *trees) deleteChildren(ctx context.Context, id string) error {
	for {
		page, err := t.m.store.ListSessions(ctx, berth.SessionFilter{Parent: id, Limit: 1000})
		if err != nil {
			return err
		}
		if len(page.Sessions) == 0 {
			return nil
		}
		for _, c := range page.Sessions {
			if err := t.m.DeleteSession(ctx, c.ID); err != nil && !isNotFound(err) {
				return err
			}
		}
	}
}
