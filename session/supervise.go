package session

import (
	"context"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
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
	rts := m.liveSessions()
	for _, ls := range rts {
		if reason := ls.Supervise(now); reason != "" {
			m.reap(ls, reason)
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
	for _, ls := range m.liveSessions() {
		if ctx.Err() != nil {
			return
		}
		ls.AckSpool(ctx)
	}
}

// reap stops a session in the background; Close waits for it.
func (m *Manager) reap(ls *live.Session, reason berth.StopReason) {
	m.supervisor.Add(1)
	go func() {
		defer m.supervisor.Done()
		ls.Logger().Info("stopping the session", "reason", reason)
		ls.Stop(context.Background(), reason, nil)
	}()
}
