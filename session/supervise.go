package session

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-sh/berth"
)

// The supervisor: one goroutine, owned by the manager, that looks at every
// live session once a tick. It marks a turn hung when the agent has sent
// nothing for limits.stall_after (runtime_warning, badge hung) and
// recovered when it speaks again (runtime_recovered); with
// limits.stall_timeout it cancels a hung turn and stops the session
// (stall_timeout). It reaps: a session idle past its idle timeout is
// stopped idle_timeout, one past its TTL ttl_expired. Reaping stops the
// agent and releases the sandbox; the workspace, the log and the queue stay,
// and the session is resumable. Nothing is reaped for idleness while a turn
// is in flight, a permission is pending or prompts are queued.

// startSupervisor starts the supervisor; Close stops it and waits.
func (m *Manager) startSupervisor() {
	ctx, cancel := context.WithCancel(context.Background())
	m.stopSupervisor = cancel
	m.supervisor.Add(1)
	go func() {
		defer m.supervisor.Done()
		t := time.NewTicker(m.opts.Limits.SuperviseEvery)
		defer t.Stop()
		lastAck := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				m.superviseOnce(now)
				if now.Sub(lastAck) >= spoolAckEvery {
					m.ackSpools(ctx)
					lastAck = now
				}
			}
		}
	}()
}

// superviseOnce looks at every live session once.
func (m *Manager) superviseOnce(now time.Time) {
	m.mu.Lock()
	closing := m.closing
	m.mu.Unlock()
	if closing {
		return
	}
	rts := m.runtimes()
	for _, rt := range rts {
		if reason := rt.supervise(now); reason != "" {
			m.reap(rt, reason)
		}
	}
	m.stopOrphans(context.Background())
}

// spoolAckEvery is how often shims learn how far the log has their
// agent's stdout, so their spools give that space back.
const spoolAckEvery = 10 * time.Second

// ackSpools tells every shim the stdout offset its session's log holds
// (committed, read from the store): what is before it is never replayed.
func (m *Manager) ackSpools(ctx context.Context) {
	for _, rt := range m.runtimes() {
		if ctx.Err() != nil {
			return
		}
		rt.ackSpool(ctx)
	}
}

// ackSpool tells the session's shim, if any, what the store has of the
// agent's stream: the shim's spool lets go of it.
func (rt *runtime) ackSpool(ctx context.Context) {
	rt.mu.Lock()
	p := rt.shim
	rt.mu.Unlock()
	if p == nil {
		return
	}
	s, err := rt.h.store.GetSession(ctx, rt.id)
	if err != nil || s.AgentOffset == 0 {
		return
	}
	if err := p.Ack(s.AgentOffset); err != nil {
		rt.logger.Debug("spool ack", "err", err)
	}
}

// reap stops a session in the background; Close waits for it.
func (m *Manager) reap(rt *runtime, reason berth.StopReason) {
	m.supervisor.Add(1)
	go func() {
		defer m.supervisor.Done()
		rt.logger.Info("stopping the session", "reason", reason)
		rt.stop(context.Background(), reason, nil)
	}()
}

// supervise updates a session's stall state and says whether it must be
// stopped, and why.
func (rt *runtime) supervise(now time.Time) berth.StopReason {
	select {
	case <-rt.handshook:
	default:
		return ""
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sess.State != berth.StateActive || rt.stopReason != "" || rt.exited || rt.client == nil {
		return ""
	}
	lim := rt.h.limits
	// Any message from the agent is activity.
	if n := rt.client.Stats().Messages; n != rt.seenMessages {
		rt.seenMessages, rt.lastActivity = n, now
		if rt.hung {
			rt.hung = false
			rt.changedLocked()
			rt.emit(rt.currentTurnIDLocked(), berth.EventRuntimeRecovered, map[string]any{"reason": "the agent is active again"})
		}
	}
	t := rt.turn
	if t != nil && rt.sess.PendingPermissions == 0 && rt.sess.PendingElicitations == 0 && lim.StallAfter > 0 {
		quiet := now.Sub(rt.lastActivity)
		if !rt.hung && quiet >= lim.StallAfter {
			rt.hung = true
			rt.changedLocked()
			rt.emit(t.id, berth.EventRuntimeWarning, map[string]any{
				"reason": fmt.Sprintf("stalled: no activity from the agent for %s during the turn", quiet.Round(time.Second))})
		}
		if rt.hung && lim.StallTimeout > 0 && quiet >= lim.StallTimeout {
			rt.cancelTurnLocked(t)
			return berth.StopStallTimeout
		}
	}
	if exp := rt.sess.ExpiresAt; exp != nil && !now.Before(*exp) {
		return berth.StopTTLExpired
	}
	idle := t == nil && rt.sess.PendingPermissions == 0 && rt.sess.PendingElicitations == 0 && rt.sess.Queue.Pending == 0 && rt.steer == nil
	timeout := lim.IdleTimeout
	if rt.sess.IdleTimeoutSeconds > 0 {
		timeout = time.Duration(rt.sess.IdleTimeoutSeconds) * time.Second
	}
	if idle && timeout > 0 && now.Sub(rt.sess.LastActivityAt) >= timeout {
		return berth.StopIdleTimeout
	}
	return ""
}
