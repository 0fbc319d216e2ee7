package session

import (
	"context"
	"errors"
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
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := m.set.enter(&m.inflight); err != nil {
		return nil, err
	}
	defer m.inflight.Done()
	// A delete of the session waits for the resume, or the resume for it.
	defer m.sessions.lock(id, false)()
	b := m.newBirth(root{})
	if ls := m.set.liveOf(id); ls != nil {
		if !ls.Closing() {
			return b.answer(ctx, ls)
		}
		// A session on its way to stopped is resumed once it got there.
		select {
		case <-ls.Done():
		case <-ctx.Done():
			return nil, berth.WrapError(berth.EUnavailable, ctx.Err(), "session still stopping")
		}
	}
	// Once something is written, the resume is carried to a recorded state.
	wctx := context.WithoutCancel(ctx)
	var other *live.Session
	err := b.run(ctx,
		stage{"check", func(ctx context.Context) error { return b.checkResume(ctx, id) }},
		stage{"reserve", b.reserve},
		stage{"live", func(context.Context) error {
			if other = b.resumeLive(); other != nil {
				return errLiveAlready
			}
			return nil
		}},
		stage{"lease", func(context.Context) error { return b.lease(wctx) }},
		stage{"restore", func(context.Context) error { return b.restore(wctx) }},
		stage{"record", func(context.Context) error { return b.resumeRecord(wctx) }},
	)
	switch {
	case errors.Is(err, errLiveAlready):
		// A second resume won the race: its answer is this one's.
		return b.answer(ctx, other)
	case err != nil:
		return nil, err
	}
	ls := b.ls
	ls.Publish(berth.ChangeSessionUpdated)
	if err := ls.LoadInput(wctx); err != nil {
		ls.Logger().Warn("load queued input", "err", err)
	}
	if err := ls.Start(wctx, b.launchAgent(wctx)); err != nil {
		return nil, err
	}
	if err := m.log.FlushSession(wctx, id); err != nil {
		ls.Logger().Warn("flush after resume", "err", err)
	}
	return b.answer(wctx, ls)
}

// errLiveAlready stops a resume that another one beat to live.
var errLiveAlready = errors.New("the session is live already")

// checkResume loads the stopped session id and checks it can resume:
// its workspace, its parent, its agent and its sandbox are there.
func (b *birth) checkResume(ctx context.Context, id string) error {
	m := b.m
	s, err := m.store.GetSession(ctx, id)
	if err != nil {
		return err
	}
	if s.State != berth.StateStopped {
		return berth.Errorf(berth.EConflict, "session is %s, not stopped", s.State)
	}
	if err := m.trees.checkParentLive(ctx, s); err != nil {
		return err
	}
	// A session moved here from another node gets its files in restore.
	if b.moved, b.movedWithRoot, err = m.place.movesHere(ctx, s); err != nil {
		return err
	}
	if b.moved == "" {
		if !live.WorkspaceExists(s.Workspace) {
			return berth.Errorf(berth.EConflict, "session is not resumable: its workspace is gone")
		}
		// A workspace that became a directory people share since the create
		// (made world-writable, mounted over, given files of other users) is
		// refused as the create would refuse it; the session stays stopped.
		if err := m.place.checkWorkspace(s.Workspace, "workspace"); err != nil {
			return err
		}
	}
	if !live.Resumable(s, b.moved != "") {
		return berth.Errorf(berth.EConflict, "session is not resumable: its agent failed to start before it opened a conversation; create a new session")
	}
	spec, ok := m.opts.Catalog.Get(s.Agent)
	if !ok {
		return berth.Errorf(berth.EConflict, "session is not resumable: agent %q is no longer in the catalog", s.Agent)
	}
	provider := m.providers[s.Sandbox.Provider]
	if provider == nil {
		return berth.Errorf(berth.EUnavailable, "sandbox %s is not available on this host", s.Sandbox.Provider)
	}
	if err := m.availability(s.Sandbox.Provider); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "sandbox %s is not available on this host", s.Sandbox.Provider)
	}
	// Resumed on another node than the one it ran on, the session has no
	// private HOME here yet: it gets a fresh one.
	if err := mkdirs(m.place.homeDir(id), s.Workspace, false, ""); err != nil {
		return err
	}
	b.s, b.spec, b.provider = s, spec, provider
	b.needsFetch()
	return nil
}

// resumeLive makes the resumed session live, starting, before its stored
// state moves: a second resume, a prompt or a stop finds it. Of two
// resumes racing, the other's live session is returned and this one goes
// no further.
func (b *birth) resumeLive() *live.Session {
	next := *b.s
	next.State, next.StopReason, next.Failure, next.Resumable = berth.StateStarting, "", nil, false
	next.Badge = berth.BadgeStarting
	if b.moved != "" {
		next.Workspace = b.moved
	}
	next.PendingPermissions, next.PendingElicitations = 0, 0
	next.LastActivityAt = time.Now().UTC()
	if next.TTLSeconds > 0 {
		// A resumed session lives its TTL again.
		exp := next.LastActivityAt.Add(time.Duration(next.TTLSeconds) * time.Second)
		next.ExpiresAt = &exp
	}
	b.ls = b.m.newLive(live.Config{Session: &next, Spec: b.spec, Resumed: true, ResumeFrom: b.s.ACP.SessionID})
	if other := b.goLive(); other != nil {
		return other
	}
	b.onFail(func() { b.m.abandon(b.ls) })
	b.s = &next
	return nil
}

// resumeRecord moves the stored session from stopped to starting,
// guarded: of two nodes resuming it at once, one wins.
func (b *birth) resumeRecord(ctx context.Context) error {
	return b.m.store.UpdateSession(ctx, b.s, berth.StateStopped)
}

// answer is the answer of a resume: the session once its handshake is
// over, or conflict with the reason it stopped.
func (b *birth) answer(ctx context.Context, ls *live.Session) (*berth.Session, error) {
	if err := ls.AwaitHandshake(ctx); err != nil {
		return nil, err
	}
	s := ls.View()
	if s.State == berth.StateActive || (s.State == berth.StateStarting && s.NeedsAuth) {
		// Active, or waiting for authenticate.
		return s, nil
	}
	<-ls.Done()
	s, err := b.m.GetSession(ctx, ls.ID())
	if err != nil {
		return nil, err
	}
	msg := "the session did not resume"
	if s.Failure != nil {
		msg = fmt.Sprintf("the session did not resume: %s", s.Failure.Message)
	}
	return nil, &berth.Error{Code: berth.EConflict, Message: msg, Details: map[string]any{"stop_reason": s.StopReason}}
}
