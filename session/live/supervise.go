package live

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-sh/berth"
)

// AckSpool tells the session's shim, if any, what the store has of the
// agent's stream: the shim's spool lets go of it.
func (ls *Session) AckSpool(ctx context.Context) {
	ls.mu.Lock()
	p := ls.shim
	ls.mu.Unlock()
	if p == nil {
		return
	}
	s, err := ls.h.Store.GetSession(ctx, ls.id)
	if err != nil || s.AgentOffset == 0 {
		return
	}
	if err := p.Ack(s.AgentOffset); err != nil {
		ls.logger.Debug("spool ack", "err", err)
	}
}

// Supervise updates a session's stall state and says whether it must be
// stopped, and why.
func (ls *Session) Supervise(now time.Time) berth.StopReason {
	select {
	case <-ls.handshook:
	default:
		return ""
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.sess.State != berth.StateActive || ls.stopReason != "" || ls.exited || ls.client == nil {
		return ""
	}
	lim := ls.h.Limits
	// Any message from the agent is activity.
	if n := ls.client.Stats().Messages; n != ls.seenMessages {
		ls.seenMessages, ls.lastActivity = n, now
		if ls.hung {
			ls.hung = false
			ls.changedLocked()
			ls.Emit(ls.currentTurnIDLocked(), berth.EventRuntimeRecovered, map[string]any{"reason": "the agent is active again"})
		}
	}
	t := ls.turn
	if t != nil && ls.sess.PendingPermissions == 0 && ls.sess.PendingElicitations == 0 && lim.StallAfter > 0 {
		quiet := now.Sub(ls.lastActivity)
		if !ls.hung && quiet >= lim.StallAfter {
			ls.hung = true
			ls.changedLocked()
			ls.Emit(t.id, berth.EventRuntimeWarning, map[string]any{
				"reason": fmt.Sprintf("stalled: no activity from the agent for %s during the turn", quiet.Round(time.Second))})
		}
		if ls.hung && lim.StallTimeout > 0 && quiet >= lim.StallTimeout {
			ls.cancelTurnLocked(t)
			return berth.StopStallTimeout
		}
	}
	if exp := ls.sess.ExpiresAt; exp != nil && !now.Before(*exp) {
		return berth.StopTTLExpired
	}
	idle := t == nil && ls.sess.PendingPermissions == 0 && ls.sess.PendingElicitations == 0 && ls.sess.Queue.Pending == 0 && ls.queue.steer == nil
	timeout := lim.IdleTimeout
	if ls.sess.IdleTimeoutSeconds > 0 {
		timeout = time.Duration(ls.sess.IdleTimeoutSeconds) * time.Second
	}
	if idle && timeout > 0 && now.Sub(ls.sess.LastActivityAt) >= timeout {
		return berth.StopIdleTimeout
	}
	return ""
}
