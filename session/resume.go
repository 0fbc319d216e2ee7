package session

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// ResumeSession implements berth.SessionService: a stopped session whose
// workspace still exists gets its agent back, in the same workspace and
// sandbox, and reopens its conversation when the agent can. What the
// session had queued runs once it is active.
func (m *Manager) ResumeSession(ctx context.Context, id string) (*berth.Session, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.inflight.Done()
	// A delete of the session waits for the resume, or the resume for it.
	defer m.sessions.lock(id, false)()
	if ls := m.liveOf(id); ls != nil {
		if !ls.Closing() {
			return m.liveResult(ctx, ls)
		}
		// A session on its way to stopped is resumed once it got there.
		select {
		case <-ls.Done():
		case <-ctx.Done():
			return nil, berth.WrapError(berth.EUnavailable, ctx.Err(), "session still stopping")
		}
	}
	s, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.State != berth.StateStopped {
		return nil, berth.Errorf(berth.EConflict, "session is %s, not stopped", s.State)
	}
	if err := m.checkParentLive(ctx, s); err != nil {
		return nil, err
	}
	if !live.WorkspaceExists(s.Workspace) {
		return nil, berth.Errorf(berth.EConflict, "session is not resumable: its workspace is gone")
	}
	// A workspace that became a directory people share since the create
	// (made world-writable, mounted over, given files of other users) is
	// refused as the create would refuse it; the session stays stopped.
	if err := m.checkWorkspace(s.Workspace, "workspace"); err != nil {
		return nil, err
	}
	if !live.Resumable(s) {
		return nil, berth.Errorf(berth.EConflict, "session is not resumable: its agent failed to start before it opened a conversation; create a new session")
	}
	spec, ok := m.opts.Catalog.Get(s.Agent)
	if !ok {
		return nil, berth.Errorf(berth.EConflict, "session is not resumable: agent %q is no longer in the catalog", s.Agent)
	}
	provider := m.providers[s.Sandbox.Provider]
	if provider == nil {
		return nil, berth.Errorf(berth.EUnavailable, "sandbox %s is not available on this host", s.Sandbox.Provider)
	}
	if err := m.available[s.Sandbox.Provider]; err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "sandbox %s is not available on this host", s.Sandbox.Provider)
	}
	// Resumed on another node than the one it ran on, the session has no
	// private HOME here yet: it gets a fresh one.
	if err := mkdirs(m.homeDir(id), s.Workspace, false); err != nil {
		return nil, err
	}
	if err := m.reserve(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)

	next := *s
	next.State, next.StopReason, next.Failure, next.Resumable = berth.StateStarting, "", nil, false
	next.Badge = berth.BadgeStarting
	next.PendingPermissions, next.PendingElicitations = 0, 0
	next.LastActivityAt = time.Now().UTC()
	if next.TTLSeconds > 0 {
		// A resumed session lives its TTL again.
		exp := next.LastActivityAt.Add(time.Duration(next.TTLSeconds) * time.Second)
		next.ExpiresAt = &exp
	}
	ls := m.newLive(live.Config{Session: &next, Spec: spec, Resumed: true, ResumeFrom: s.ACP.SessionID})
	// Live first, so a second resume, a prompt or a stop finds it; then the
	// stored state moves, guarded: of two resumes racing, one wins.
	if other := m.goLive(ls, true); other != nil {
		m.release()
		return m.liveResult(ctx, other)
	}
	// In a cluster, this node drives it from here: of two nodes resuming
	// it at once, one takes the lease.
	if err := m.acquire(ctx, id); err != nil {
		m.abandon(ls)
		return nil, err
	}
	if err := m.store.UpdateSession(ctx, &next, berth.StateStopped); err != nil {
		m.abandon(ls)
		m.releaseLease(ctx, id)
		return nil, err
	}
	ls.Publish(berth.ChangeSessionUpdated)
	if err := ls.LoadInput(ctx); err != nil {
		ls.Logger().Warn("load queued input", "err", err)
	}
	if err := ls.Start(ctx, ls.Launch(ctx, provider)); err != nil {
		return nil, err
	}
	if err := m.log.FlushSession(ctx, id); err != nil {
		ls.Logger().Warn("flush after resume", "err", err)
	}
	return m.liveResult(ctx, ls)
}

// liveResult is the answer of a resume: the session once its handshake is
// over, or conflict with the reason it stopped.
func (m *Manager) liveResult(ctx context.Context, ls *live.Session) (*berth.Session, error) {
	if err := ls.AwaitHandshake(ctx); err != nil {
		return nil, err
	}
	s := ls.View()
	if s.State == berth.StateActive || (s.State == berth.StateStarting && s.NeedsAuth) {
		// Active, or waiting for authenticate.
		return s, nil
	}
	<-ls.Done()
	s, err := m.GetSession(ctx, ls.ID())
	if err != nil {
		return nil, err
	}
	msg := "the session did not resume"
	if s.Failure != nil {
		msg = fmt.Sprintf("the session did not resume: %s", s.Failure.Message)
	}
	return nil, &berth.Error{Code: berth.EConflict, Message: msg, Details: map[string]any{"stop_reason": s.StopReason}}
}
