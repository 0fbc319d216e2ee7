package session

import (
	"context"

	"github.com/berth-sh/berth"
)

// cancelCleared is why clear canceled a pending entry.
const cancelCleared = "cleared"

// clearedData is the data of conversation_cleared.
type clearedData struct {
	OldACPSessionID string `json:"old_acp_session_id"`
	ACPSessionID    string `json:"acp_session_id"`
	CanceledEntries int    `json:"canceled_entries"`
}

// ClearSession implements berth.SessionService: the agent starts a new
// conversation (session/new) in the same workspace, sandbox and settings;
// pending input is canceled; the log goes on with conversation_cleared.
// A turn in flight is EConflict unless cancel, which cancels it first.
// EConflict when the session is not active, EUnavailable when the agent
// cannot start the new conversation (the old one stays), ENotFound.
func (m *Manager) ClearSession(ctx context.Context, id string, cancel bool) (*berth.Session, error) {
	rt, err := m.handshakenRuntime(ctx, id, "there is no conversation to clear")
	if err != nil {
		return nil, err
	}
	return rt.clear(ctx, cancel)
}

// clear is ClearSession on the live session.
func (rt *runtime) clear(ctx context.Context, cancel bool) (*berth.Session, error) {
	rt.authMu.Lock()
	defer rt.authMu.Unlock()
	wctx := context.WithoutCancel(ctx)

	rt.mu.Lock()
	if err := rt.acceptingLocked(); err != nil {
		rt.mu.Unlock()
		return nil, err
	}
	t := rt.turn
	if t != nil && !cancel {
		rt.mu.Unlock()
		return nil, &berth.Error{Code: berth.EConflict, Message: "a turn is in flight: cancel it, or clear with ?cancel=true",
			Details: map[string]any{"turn_id": t.id}}
	}
	// From here no input is taken or dispatched until the new conversation is there.
	rt.clearing = true
	defer func() {
		rt.mu.Lock()
		rt.clearing = false
		rt.mu.Unlock()
	}()
	canceled, err := rt.cancelInputLocked(wctx)
	if err != nil {
		rt.mu.Unlock()
		return nil, err
	}
	if t != nil {
		rt.cancelTurnLocked(t)
	}
	rt.mu.Unlock()
	if t != nil {
		select {
		case <-t.done:
		case <-ctx.Done():
			return nil, berth.WrapError(berth.EUnavailable, ctx.Err(), "the turn in flight has not ended yet")
		}
	}

	hctx, stop := context.WithTimeout(wctx, rt.h.limits.HandshakeTimeout)
	defer stop()
	ns, err := rt.client.NewSession(hctx, rt.workspace, rt.mcpServers())
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "the agent did not start a new conversation (the old one goes on)")
	}
	rt.mu.Lock()
	if rt.exited || rt.stopReason != "" {
		rt.mu.Unlock()
		return nil, berth.Errorf(berth.EConflict, "the session stopped while it was cleared")
	}
	old := rt.acpSession()
	rt.setACPSession(ns.SessionID)
	// A conversation the agent could not reopen carried the transcript so far: no more.
	rt.carry = ""
	err = rt.saveLocked(wctx, berth.StateActive, func(s *berth.Session) { s.ACP.SessionID = ns.SessionID })
	rt.emit("", berth.EventConversationCleared, clearedData{OldACPSessionID: old, ACPSessionID: ns.SessionID, CanceledEntries: canceled})
	rt.logger.Info("conversation cleared", "old_acp_session_id", old, "acp_session_id", ns.SessionID)
	rt.mu.Unlock()
	if err != nil {
		rt.logger.Warn("record the new conversation", "err", err)
	}
	if err := rt.h.log.FlushSession(ctx, rt.id); err != nil {
		rt.logger.Warn("flush after clear", "err", err)
	}
	return rt.view(), nil
}

// cancelInputLocked cancels every pending entry and the staged steer,
// moving the session to a new input generation as an interrupt does; it
// returns how many it canceled. The store is written under mu (see runtime).
func (rt *runtime) cancelInputLocked(ctx context.Context) (int, error) {
	gen := rt.sess.Queue.Generation + 1
	canceled, err := rt.h.store.CancelQueue(ctx, rt.id, gen)
	if err != nil {
		return 0, err
	}
	rt.steer, rt.next, rt.sess.Queue.Pending = nil, nil, 0
	for _, e := range canceled {
		rt.noteEntryLocked(e.ID, entryOutcome{canceled: true})
		rt.emit("", berth.EventPromptCanceled, entryData{EntryID: e.ID, Reason: cancelCleared})
	}
	if err := rt.saveLocked(ctx, rt.sess.State, func(s *berth.Session) {
		s.Queue = berth.QueueInfo{Generation: gen}
	}); err != nil {
		return len(canceled), err
	}
	return len(canceled), nil
}
