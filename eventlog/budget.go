package eventlog

import (
	"container/list"
	"context"
	"sync"

	"github.com/berth-sh/berth"
)

// budget bounds how many events may be queued or in flight. Producers
// acquire one unit per event before they enqueue and the writer releases
// the units once the events are committed (or have failed), so memory held
// by the log stays bounded and a producer that outruns the store blocks:
// that is the back-pressure.
//
// Waiters are served strictly in arrival order, so a large append is not
// starved by a stream of small ones, and a release wakes only the waiters
// it admits.
type budget struct {
	mu   sync.Mutex
	size int
	used int
	// peak is the most units ever granted at once.
	peak    int
	waiters list.List // of *budgetWaiter, oldest first
	closed  bool
}

// budgetWaiter is a producer blocked in acquire.
type budgetWaiter struct {
	n     int
	ready chan struct{} // closed once the units are granted (or the budget closed)
}

// newBudget returns a budget of size units.
func newBudget(size int) *budget { return &budget{size: size} }

// fits reports whether n more units may be granted now. A request larger
// than the whole budget is granted alone, when nothing else is held.
func (b *budget) fits(n int) bool { return b.used == 0 || b.used+n <= b.size }

// acquire blocks until n units are granted, ctx ends (ctx.Err()) or the
// budget is closed (EUnavailable).
func (b *budget) acquire(ctx context.Context, n int) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errClosed
	}
	if b.waiters.Len() == 0 && b.fits(n) {
		b.take(n)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()

	select {
	case <-w.ready:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			// Closed while (or after) being granted: give the units back
			// so in-use accounting stays exact.
			if w.n > 0 {
				b.used -= w.n
				w.n = 0
			}
			return errClosed
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready:
			// Granted just as ctx ended: return the units and let the
			// next waiters in.
			b.used -= w.n
			w.n = 0
			b.grant()
		default:
			isFront := b.waiters.Front() == elem
			b.waiters.Remove(elem)
			// The front waiter leaving may unblock the smaller ones behind.
			if isFront {
				b.grant()
			}
		}
		return ctx.Err()
	}
}

// take grants n units. b.mu is held.
func (b *budget) take(n int) {
	b.used += n
	b.peak = max(b.peak, b.used)
}

// release returns n units and admits the waiters that now fit.
func (b *budget) release(n int) {
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// grant admits waiters in order while the oldest one fits. b.mu is held.
func (b *budget) grant() {
	for {
		front := b.waiters.Front()
		if front == nil {
			return
		}
		w := front.Value.(*budgetWaiter)
		if !b.fits(w.n) {
			return
		}
		b.take(w.n)
		b.waiters.Remove(front)
		close(w.ready)
	}
}

// close fails every waiting and future acquire with EUnavailable.
func (b *budget) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for e := b.waiters.Front(); e != nil; e = e.Next() {
		w := e.Value.(*budgetWaiter)
		w.n = 0 // not granted: nothing to give back
		close(w.ready)
	}
	b.waiters.Init()
}

// inUse returns the units granted and not yet released.
func (b *budget) inUse() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// usage returns the units granted now and the most ever granted at once.
func (b *budget) usage() (used, peak int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// errClosed is the error of every call on a closed log.
var errClosed = berth.Errorf(berth.EUnavailable, "event log is closed")
