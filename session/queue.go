package session

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"

	live "github.com/berth-sh/berth/session/live"
)

// Prompt implements berth.SessionService: an idle session starts a turn, a
// busy one queues, interrupts or steers, and a stopped resumable one is
// resumed first.
func (m *Manager) Prompt(ctx context.Context, id string, req berth.PromptRequest) (*berth.PromptResult, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := req.Validate(m.opts.Limits.MaxPromptBytes); err != nil {
		return nil, err
	}
	ls := m.set.liveOf(id)
	if ls != nil && ls.Gone() {
		// Its agent has exited and the session is being closed: once it is
		// stopped, it can be resumed.
		select {
		case <-ls.Done():
		case <-ctx.Done():
			return nil, berth.WrapError(berth.EUnavailable, ctx.Err(), "session still stopping")
		}
		ls = nil
	}
	if ls == nil && req.Content != nil {
		// What the agent said it takes is kept while it is stopped: a
		// prompt it cannot take does not resume it.
		s, err := m.store.GetSession(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(s.ACP.Capabilities) > 0 {
			if err := live.CheckCapabilities(req.Content, acp.PromptCapabilitiesOf(s.ACP.Capabilities)); err != nil {
				return nil, err
			}
		}
	}
	if ls == nil {
		if req.Mode == berth.ModeSteer {
			if _, err := m.store.GetSession(ctx, id); err != nil {
				return nil, err
			}
			return nil, berth.Errorf(berth.EConflict, "steer needs a turn in flight; the session is stopped")
		}
		if _, err := m.ResumeSession(ctx, id); err != nil {
			return nil, err
		}
		if ls = m.set.liveOf(id); ls == nil {
			return nil, berth.Errorf(berth.EConflict, "the session stopped while it resumed")
		}
	}
	if err := ls.AwaitHandshake(ctx); err != nil {
		return nil, err
	}
	in, err := ls.ResolveInput(ctx, req)
	if err != nil {
		return nil, err
	}
	return ls.Prompt(ctx, req.Mode, in)
}

// entryPrefix begins the id of every queue entry.
const entryPrefix = "entry_"

// ListQueue implements berth.SessionService.
func (m *Manager) ListQueue(ctx context.Context, id string) (*berth.QueueView, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	entries, err := m.store.ListQueue(ctx, id)
	if err != nil {
		return nil, err
	}
	if entries == nil {
		entries = []*berth.QueueEntry{}
	}
	var gen int64
	if ls := m.set.liveOf(id); ls != nil {
		gen = ls.QueueGeneration()
	} else {
		s, err := m.store.GetSession(ctx, id)
		if err != nil {
			return nil, err
		}
		gen = s.Queue.Generation
	}
	return &berth.QueueView{Entries: entries, Generation: gen}, nil
}

// CancelQueueEntry implements berth.SessionService. For a stopped session
// the drop is recorded in the store only: its log is closed by
// session_stopped.
func (m *Manager) CancelQueueEntry(ctx context.Context, id, entryID string) error {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return err
	}
	if ls := m.set.liveOf(id); ls != nil {
		if done, err := ls.CancelEntry(context.WithoutCancel(ctx), entryID); done {
			return err
		}
		// The agent is gone and the session is being closed: wait for it.
		select {
		case <-ls.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var e *berth.QueueEntry
	var s *berth.Session
	err := m.leases.leased(ctx, id, func() error {
		var err error
		if e, err = m.store.CancelQueueEntry(ctx, id, entryID); err != nil {
			return err
		}
		s, err = m.store.GetSession(ctx, id)
		if err != nil || s.State != berth.StateStopped || e.Kind != berth.EntryQueue || s.Queue.Pending == 0 {
			s = nil
			return nil
		}
		s.Queue.Pending--
		return m.store.UpdateSession(ctx, s, berth.StateStopped)
	})
	if s == nil && err == nil {
		return nil
	}
	if err != nil && s == nil {
		return err
	}
	if err != nil {
		if !berth.IsCode(err, berth.EConflict) {
			m.logger.Warn("record the queue count", "session_id", id, "err", err)
		}
		return nil
	}
	m.changes.publishStored(berth.ChangeSessionUpdated, m.stored(s))
	return nil
}

// waitEntry waits until a queued or staged prompt has run and returns its
// turn's result. EConflict when it was canceled or the session stopped
// before it ran.
func (m *Manager) waitEntry(ctx context.Context, id, entryID string) (*berth.TurnResult, error) {
	for {
		ls := m.set.liveOf(id)
		if ls == nil {
			if _, err := m.store.GetSession(ctx, id); err != nil {
				return nil, err
			}
			return nil, berth.Errorf(berth.EConflict, "the session stopped before prompt %s ran; it stays queued", entryID)
		}
		o, ok, changed := ls.Outcome(entryID)
		switch {
		case ok && o.Canceled:
			return nil, berth.Errorf(berth.EConflict, "prompt %s was canceled before it ran", entryID)
		case ok:
			return m.WaitTurn(ctx, id, o.TurnID)
		}
		select {
		case <-changed:
		case <-ls.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
