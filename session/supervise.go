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
	// due is when each live session it has looked at needs its next look
	// (the supervisor's goroutine's alone): keyed by the pointer, so that
	// a session not due is skipped without touching its memory.
	due map[*live.Session]time.Time
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

// idleLookEvery is how many ticks an idle session goes between looks at
// most, though its deadlines are further off: a prompt that makes it busy
// has its turn watched for a stall from the next look (10 s by default,
// against a stall_after of 2 min). Looking at a thousand idle sessions
// every tick was most of an idle daemon's CPU: each look touches a dozen
// cold cache lines of the session.
const idleLookEvery = 10

// once looks at every live session that is due: each tick at one with a
// turn, a question or the queue in flight, at an idle one by its TTL or
// idle deadline and at least every idleLookEvery ticks. A child it looks
// at whose parent is gone is stopped.
func (v *supervisor) once(now time.Time) {
	if v.m.set.isClosing() {
		return
	}
	rts := v.m.set.all()
	due := make(map[*live.Session]time.Time, len(rts))
	latest := now.Add(idleLookEvery * v.m.opts.Limits.SuperviseEvery)
	looked := rts[:0]
	for _, ls := range rts {
		if next, ok := v.due[ls]; ok && now.Before(next) {
			due[ls] = next
			continue
		}
		reason, quietUntil := ls.Supervise(now)
		if reason != "" {
			v.reap(ls, reason)
			continue
		}
		looked = append(looked, ls)
		if quietUntil.After(latest) {
			quietUntil = latest
		}
		due[ls] = quietUntil
	}
	v.due = due
	v.m.trees.stopOrphansOf(context.Background(), looked)
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
