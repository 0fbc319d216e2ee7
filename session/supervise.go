package session

import (
	"context"
	"sync"
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

// supervisor is the manager's supervisor.
type supervisor struct {
	m *Manager
	// running counts the supervisor's goroutine and the stops it started;
	// cancel ends the goroutine.
	running sync.WaitGroup
	cancel  context.CancelFunc
}

// stop ends the supervisor's goroutine; the stops it started go on
// (running counts them).
func (v *supervisor) stop() {
	if v.cancel != nil {
		v.cancel()
	}
}

// start starts the supervisor; Close stops it and waits.
func (v *supervisor) start() {
	ctx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	v.running.Add(1)
	go func() {
		defer v.running.Done()
		t := time.NewTicker(v.m.opts.Limits.SuperviseEvery)
		defer t.Stop()
		lastAck := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				v.once(now)
				if now.Sub(lastAck) >= spoolAckEvery {
					v.ackSpools(ctx)
					lastAck = now
				}
			}
		}
	}()
}

// once looks at every live session once.
func (v *supervisor) once(now time.Time) {
	if v.m.set.isClosing() {
		return
	}
	rts := v.m.set.all()
	for _, ls := range rts {
		if reason := ls.Supervise(now); reason != "" {
			v.reap(ls, reason)
		}
	}
	v.m.trees.stopOrphans(context.Background())
}

// spoolAckEvery is how often shims learn how far the log has their
// agent's stdout, so their spools give that space back.
const spoolAckEvery = 10 * time.Second

// ackSpools tells every shim the stdout offset its session's log holds
// (committed, read from the store): what is before it is never replayed.
func (v *supervisor) ackSpools(ctx context.Context) {
	for _, ls := range v.m.set.all() {
		if ctx.Err() != nil {
			return
		}
		ls.AckSpool(ctx)
	}
}

// reap stops a session in the background; Close waits for it.
func (v *supervisor) reap(ls *live.Session, reason berth.StopReason) {
	v.running.Add(1)
	go func() {
		defer v.running.Done()
		ls.Logger().Info("stopping the session", "reason", reason)
		ls.Stop(context.Background(), reason, nil)
	}()
}
