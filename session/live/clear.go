package live

import (
	"context"

	"github.com/berth-sh/berth"
)

// CancelCleared is why clear canceled a pending entry.
const CancelCleared = "cleared"

// ClearedData is the data of conversation_cleared.
type ClearedData struct {
	OldACPSessionID string `json:"old_acp_session_id"`
	ACPSessionID    string `json:"acp_session_id"`
	CanceledEntries int    `json:"canceled_entries"`
}

// Clear is ClearSession on the live session.
func (ls *Session) Clear(ctx context.Context, cancel bool) (*berth.Session, error) {
	return ls.conv.clear(ctx, cancel)
}

// clear is Clear.
func (c *conversation) clear(ctx context.Context, cancel bool) (*berth.Session, error) {
	ls := c.ls
	defer ls.tellLeaseLost()
	c.authMu.Lock()
	defer c.authMu.Unlock()
	wctx := context.WithoutCancel(ctx)

	ls.mu.Lock()
	if err := ls.queue.acceptingLocked(); err != nil {
		ls.mu.Unlock()
		return nil, err
	}
	t := ls.turns.cur
	if t != nil && !cancel {
		ls.mu.Unlock()
		return nil, &berth.Error{Code: berth.EConflict, Message: "a turn is in flight: cancel it, or clear with ?cancel=true",
			Details: map[string]any{"turn_id": t.id}}
	}
	// From here no input is taken or dispatched until the new conversation is there.
	c.clearing = true
	defer func() {
		ls.mu.Lock()
		c.clearing = false
		ls.mu.Unlock()
	}()
	canceled, _, err := ls.queue.cancelAllLocked(wctx, CancelCleared)
	if err != nil {
		ls.mu.Unlock()
		return nil, err
	}
	if t != nil {
		ls.turns.cancelLocked(t)
	}
	ls.mu.Unlock()
	if t != nil {
		select {
		case <-t.done:
		case <-ctx.Done():
			return nil, berth.WrapError(berth.EUnavailable, ctx.Err(), "the turn in flight has not ended yet")
		}
	}

	hctx, stop := context.WithTimeout(wctx, ls.h.Limits.HandshakeTimeout)
	defer stop()
	ns, err := ls.client.NewSession(hctx, ls.workspace, c.mcpServers())
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "the agent did not start a new conversation (the old one goes on)")
	}
	ls.mu.Lock()
	if ls.exited || ls.stopReason != "" {
		ls.mu.Unlock()
		return nil, berth.Errorf(berth.EConflict, "the session stopped while it was cleared")
	}
	old := c.id()
	c.setID(ns.SessionID)
	// A conversation the agent could not reopen carried the transcript so far: no more.
	c.carry = ""
	err = ls.saveLocked(wctx, berth.StateActive, func(s *berth.Session) {
		// What the agent offers in the new conversation.
		ctl := controlsOf(s.ACP)
		applySetup(&ctl, ns.SessionSetup)
		s.ACP = withControls(s.ACP, ctl)
		s.ACP.SessionID = ns.SessionID
	})
	ls.Emit("", berth.EventConversationCleared, ClearedData{OldACPSessionID: old, ACPSessionID: ns.SessionID, CanceledEntries: canceled})
	ls.logger.Info("conversation cleared", "old_acp_session_id", old, "acp_session_id", ns.SessionID)
	ls.mu.Unlock()
	if err != nil {
		ls.logger.Warn("record the new conversation", "err", err)
	}
	// The new conversation may open in a mode that would not ask.
	ls.controls.askFirst(wctx)
	if err := ls.h.Log.FlushSession(ctx, ls.id); err != nil {
		ls.logger.Warn("flush after clear", "err", err)
	}
	return ls.View(), nil
}
