package eventlog

import (
	"sync"

	"github.com/berth-sh/berth"
)

// hub is the in-memory face of one session's log: what the writer knows
// of it (the committed last seq, which seeds the next seq), the recent
// events for live readers, and the broadcast that wakes them.
//
// Only the writer goroutine changes known, last and the ring; readers take
// the lock only to copy, so the writer never waits on a slow reader.
type hub struct {
	mu sync.Mutex
	// known says last and lastType are the store's truth. While false
	// (before the writer first touched the session, or after a failed
	// commit) readers ask the store instead.
	known bool
	last  int64 // highest committed seq
	// seen is the highest seq a notice said is committed (by any node);
	// the hub is not known while last is below it.
	seen     int64
	lastType string // type of the event at last
	ring     ring
	// notify is closed and replaced on every publish: a cheap broadcast
	// to every reader waiting for what comes after last.
	notify chan struct{}
	gone   bool // the session was forgotten (deleted)
	// bytes bounds the event data of the session queued or being
	// committed (Options.SessionBytes); nil when unbounded.
	bytes *budget
}

// newHub returns an empty hub whose ring keeps up to ringSize events and
// ringBytes of their data.
func newHub(ringSize, ringBytes, sessionBytes int) *hub {
	h := &hub{ring: ring{size: ringSize, maxBytes: ringBytes}, notify: make(chan struct{})}
	if sessionBytes > 0 {
		h.bytes = newBudget(sessionBytes)
	}
	return h
}

// committed returns the last committed seq, if known.
func (h *hub) committed() (last int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last, h.known
}

// load records the committed state the writer read from the store.
func (h *hub) load(last int64, lastType string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ring.last() != last {
		// The ring no longer ends where the log does (it cannot, unless
		// something else wrote to the store): it would serve a gap.
		h.ring.reset()
	}
	// A notice newer than what was read says the read is already stale.
	h.known, h.last, h.lastType = last >= h.seen, last, lastType
}

// invalidate makes the hub forget its committed state after a failed
// commit; the writer reloads it from the store before it assigns the next
// seq, so a failure never leaves a gap.
func (h *hub) invalidate() {
	h.mu.Lock()
	h.known = false
	h.mu.Unlock()
}

// publish makes committed events visible to readers and wakes them. evs
// follow last directly and are in seq order.
func (h *hub) publish(evs []berth.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gone || len(evs) == 0 {
		return
	}
	if evs[0].Seq != h.ring.last()+1 {
		h.ring.reset()
	}
	end := evs[len(evs)-1]
	// Another node may have committed past these already (a notice came
	// first): then the store, not this hub, knows the end.
	h.known, h.last, h.lastType = end.Seq >= h.seen, end.Seq, end.Type
	if end.Type == berth.EventSessionStopped {
		// A stopped session has no live readers to serve quickly; its
		// memory goes back, and a reader that is behind reads the store.
		h.ring.reset()
	} else {
		h.ring.push(evs)
	}
	h.broadcast()
}

// broadcast wakes every reader waiting on the hub. h.mu is held.
func (h *hub) broadcast() {
	close(h.notify)
	h.notify = make(chan struct{})
}

// forget marks the hub dead and wakes its readers, which then fail with
// ENotFound.
func (h *hub) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone, h.known = true, false
	h.ring.reset()
	if h.bytes != nil {
		// Producers waiting for room fail: the session is gone.
		h.bytes.close()
	}
	close(h.notify)
	h.notify = make(chan struct{})
}
