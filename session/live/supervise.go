package live

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// AckSpool tells the session's shim, if any, what the store has of the
// agent's stream: the shim's spool lets go of it. A shim already told
// everything the log has committed is neither asked about nor woken: an
// idle session costs the store and its shim nothing (docs/api.md, Agents
// outlive the daemon). Only the supervisor calls it, one session at a
// time.
func (ls *Session) AckSpool(ctx context.Context) {
	ls.mu.Lock()
	p := ls.shim
	ls.mu.Unlock()
	if p == nil {
		return
	}
	// Read before the store: an event committed meanwhile is acked next
	// time. Zero is a log that does not know: the store is asked.
	seq := ls.h.Log.LastSeq(ls.id)
	if p != ls.acked.proc {
		ls.acked = spoolAck{proc: p, seq: -1}
	}
	if seq > 0 && seq == ls.acked.seq {
		return
	}
	s, err := ls.h.Store.GetSession(ctx, ls.id)
	if err != nil {
		return
	}
	ls.acked.seq = seq
	if s.AgentOffset == 0 || s.AgentOffset == ls.acked.offset {
		return
	}
	if err := p.Ack(s.AgentOffset); err != nil {
		ls.logger.Debug("spool ack", "err", err)
		return
	}
	ls.acked.offset = s.AgentOffset
}

// Supervise updates a session's stall state and says whether it must be
// stopped, and why. quietUntil is when it next may need a look on its
// own: its TTL or idle deadline, while it is idle with nothing in flight
// or waiting (far off when it has neither); zero while a turn, a question
// or the queue is in flight, or it is not yet active, when every tick
// should look.
func (ls *Session) Supervise(now time.Time) (reason berth.StopReason, quietUntil time.Time) {
	select {
	case <-ls.life.handshook:
	default:
		return "", time.Time{}
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.sess.State != berth.StateActive || ls.stopReason != "" || ls.exited || ls.client == nil {
		return "", time.Time{}
	}
	if ls.turns.watchLocked(now) {
		return berth.StopStallTimeout, time.Time{}
	}
	exp := ls.sess.ExpiresAt
	if exp != nil && !now.Before(*exp) {
		return berth.StopTTLExpired, time.Time{}
	}
	lim := ls.h.Limits
	idle := ls.turns.cur == nil && ls.sess.PendingPermissions == 0 && ls.sess.PendingElicitations == 0 && ls.sess.Queue.Pending == 0 && ls.queue.steer == nil
	if !idle {
		return "", time.Time{}
	}
	timeout := lim.IdleTimeout
	if ls.sess.IdleTimeoutSeconds > 0 {
		timeout = time.Duration(ls.sess.IdleTimeoutSeconds) * time.Second
	}
	quietUntil = farOff
	if timeout > 0 {
		if now.Sub(ls.sess.LastActivityAt) >= timeout {
			return berth.StopIdleTimeout, time.Time{}
		}
		quietUntil = ls.sess.LastActivityAt.Add(timeout)
	}
	if exp != nil && exp.Before(quietUntil) {
		quietUntil = *exp
	}
	return "", quietUntil
}

// farOff is the quietUntil of an idle session with no deadline.
var farOff = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// watchLocked is the supervisor's look at the agent's activity: any
// message from it is activity; a turn with none for limits.stall_after,
// and no question waiting for the user, is hung (a runtime_warning, until
// the agent speaks again), and past limits.stall_timeout it is cancelled
// and the session is to stop (true).
func (tr *turns) watchLocked(now time.Time) bool {
	ls := tr.ls
	lim := ls.h.Limits
	if n := ls.client.Stats().Messages; n != tr.seenMessages {
		tr.seenMessages, tr.lastActivity = n, now
		if tr.hung {
			tr.hung = false
			ls.changedLocked()
			ls.Emit(tr.currentIDLocked(), berth.EventRuntimeRecovered, map[string]any{"reason": "the agent is active again"})
		}
	}
	t := tr.cur
	if t == nil || ls.sess.PendingPermissions > 0 || ls.sess.PendingElicitations > 0 || lim.StallAfter <= 0 {
		return false
	}
	quiet := now.Sub(tr.lastActivity)
	if !tr.hung && quiet >= lim.StallAfter {
		tr.hung = true
		ls.changedLocked()
		ls.Emit(t.id, berth.EventRuntimeWarning, map[string]any{
			"reason": fmt.Sprintf("stalled: no activity from the agent for %s during the turn", quiet.Round(time.Second))})
	}
	if tr.hung && lim.StallTimeout > 0 && quiet >= lim.StallTimeout {
		tr.cancelLocked(t)
		return true
	}
	return false
}

// spoolAck is what AckSpool last did: the shim it looked at, the log's
// last committed seq then, and the stdout offset it told the shim.
type spoolAck struct {
	proc   *shim.Proc
	seq    int64
	offset int64
}
