package session

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// The supervisor: one goroutine, owned by the manager, that looks at each
// live session when it is due (see once). It marks a turn hung when the
// agent has sent nothing for limits.stall_after (runtime_warning, badge
// hung) and recovered when it speaks again (runtime_recovered); with
// limits.stall_timeout it cancels a hung turn and stops the session
// (stall_timeout). It reaps: a session idle past its idle timeout is
// stopped idle_timeout, one past its TTL ttl_expired. Reaping stops the
// agent and releases the sandbox; the workspace, the log and the queue stay,
// and the session is resumable. Nothing is reaped for idleness while a turn
// is in flight, a permission is pending or prompts are queued.

// supervisor is the manager's supervisor.
type supervisor struct {
	m *Manager
	// wokenMu guards woken: the sessions whose view changed since the
	// last tick (Host.Changed), each to be looked at on the next.
	wokenMu sync.Mutex
	woken   map[*live.Session]struct{}
	// The rest is the supervisor's goroutine's alone. due is when each
	// live session it knows of needs its next look, and next the same
	// looks in time order (an entry whose time is no longer its session's
	// due is stale, and skipped): keyed by the pointer, so that a session
	// not due is never touched. toAck are the sessions looked at since
	// the spools were last acked; ticks counts the ticks.
	due   map[*live.Session]time.Time
	next  lookQueue
	toAck map[*live.Session]struct{}
	ticks int
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

// wake asks for a look at ls on the next tick: its view changed (a
// prompt queued, a turn begun, a question asked, its state).
// Called under the session's lock, it only takes the supervisor's own.
func (v *supervisor) wake(ls *live.Session) {
	v.wokenMu.Lock()
	defer v.wokenMu.Unlock()
	if v.woken == nil {
		v.woken = map[*live.Session]struct{}{}
	}
	v.woken[ls] = struct{}{}
}

// idleLookEvery is how many ticks an idle session goes between looks at
// most, though its deadlines are further off: a change to the session (a
// prompt, a turn, a question) wakes it for the next tick (wake), so this
// bounds only what no change announces (a child whose parent is gone,
// the spool's ack). Looking at a thousand idle sessions every tick was
// most of an idle daemon's CPU: each look touches a dozen cold cache
// lines of the session.
const idleLookEvery = 300

// findEvery is how many ticks go between reads of the live sessions for
// ones the supervisor does not know yet (a session reattached at boot,
// one that went live without a change): only pointers are compared.
const findEvery = 10

// once looks at every live session that is due: each tick at one with a
// turn, a question or the queue in flight or that changed since the last
// tick, at an idle one by its TTL or idle deadline and at least every
// idleLookEvery ticks. A child it looks at whose parent is gone is
// stopped.
func (v *supervisor) once(now time.Time) {
	if v.m.set.isClosing() {
		return
	}
	if v.due == nil {
		v.due = map[*live.Session]time.Time{}
		v.toAck = map[*live.Session]struct{}{}
	}
	if v.ticks%findEvery == 0 {
		v.find(now)
	}
	v.ticks++
	v.wokenMu.Lock()
	woken := v.woken
	v.woken = nil
	v.wokenMu.Unlock()
	for ls := range woken {
		v.lookAt(ls, now)
	}
	latest := now.Add(idleLookEvery * v.m.opts.Limits.SuperviseEvery)
	soon := now.Add(v.m.opts.Limits.SuperviseEvery)
	var looked []*live.Session
	for len(v.next) > 0 && !v.next[0].at.After(now) {
		e := heap.Pop(&v.next).(look)
		if at, ok := v.due[e.ls]; !ok || !at.Equal(e.at) {
			continue
		}
		delete(v.due, e.ls)
		// Gone from the set (stopped, deleted): forgotten.
		if v.m.set.liveOf(e.ls.ID()) != e.ls {
			continue
		}
		reason, quietUntil := e.ls.Supervise(now)
		if reason != "" {
			v.reap(e.ls, reason)
			continue
		}
		looked = append(looked, e.ls)
		v.toAck[e.ls] = struct{}{}
		switch {
		case quietUntil.IsZero():
			quietUntil = soon
		case quietUntil.After(latest):
			quietUntil = latest
		}
		v.lookAt(e.ls, quietUntil)
	}
	v.m.trees.stopOrphansOf(context.Background(), looked)
}

// find schedules a look now at each live session the supervisor does not
// know yet, and forgets those gone from the set, their queued looks
// included: a session that ended is not held in memory until its next
// look would have come.
func (v *supervisor) find(now time.Time) {
	sessions := v.m.set.all()
	in := make(map[*live.Session]bool, len(sessions))
	for _, ls := range sessions {
		in[ls] = true
		if _, ok := v.due[ls]; !ok {
			v.lookAt(ls, now)
		}
	}
	for ls := range v.due {
		if !in[ls] {
			delete(v.due, ls)
		}
	}
	for ls := range v.toAck {
		if !in[ls] {
			delete(v.toAck, ls)
		}
	}
	kept := v.next[:0]
	for _, e := range v.next {
		if at, ok := v.due[e.ls]; ok && at.Equal(e.at) {
			kept = append(kept, e)
		}
	}
	clear(v.next[len(kept):])
	v.next = kept
	heap.Init(&v.next)
}

// lookAt makes at the next look at ls, unless one is due sooner.
func (v *supervisor) lookAt(ls *live.Session, at time.Time) {
	if cur, ok := v.due[ls]; ok && !at.Before(cur) {
		return
	}
	v.due[ls] = at
	heap.Push(&v.next, look{at: at, ls: ls})
}

// spoolAckEvery is how often shims learn how far the log has their
// agent's stdout, so their spools give that space back.
const spoolAckEvery = 10 * time.Second

// ackSpools tells the shim of every session looked at since the last
// time the stdout offset its session's log holds (committed, read from
// the store): what is before it is never replayed. A session with
// nothing going on is looked at, and so acked, at least every
// idleLookEvery ticks.
func (v *supervisor) ackSpools(ctx context.Context) {
	for ls := range v.toAck {
		if ctx.Err() != nil {
			return
		}
		delete(v.toAck, ls)
		ls.AckSpool(ctx)
	}
}

// look is a session's next look, in the supervisor's queue.
type look struct {
	at time.Time
	ls *live.Session
}

// lookQueue is a heap of looks, soonest first.
type lookQueue []look

func (q lookQueue) Len() int           { return len(q) }
func (q lookQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q lookQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }

// Push adds a look (container/heap).
func (q *lookQueue) Push(x any) { *q = append(*q, x.(look)) }

// Pop takes the last look (container/heap).
func (q *lookQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = look{}
	*q = old[:len(old)-1]
	return e
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
