package inflight

import "testing"

// A Count is idle with nothing in flight, not while something is, and
// again once it is done (done counting once); IdleSince sees a start
// that came and went.
func TestCount(t *testing.T) {
	var c Count
	isIdle := func() bool {
		select {
		case <-c.Idle():
			return true
		default:
			return false
		}
	}
	if !isIdle() || c.InFlight() != 0 {
		t.Fatal("the zero Count is not idle")
	}
	started := c.Started()
	a, b := c.Start(), c.Start()
	if isIdle() || c.InFlight() != 2 {
		t.Fatalf("idle with %d in flight", c.InFlight())
	}
	a()
	a()
	if isIdle() || c.InFlight() != 1 {
		t.Fatalf("a done twice left %d in flight", c.InFlight())
	}
	b()
	if !isIdle() || c.InFlight() != 0 {
		t.Fatal("not idle once all are done")
	}
	if c.IdleSince(started) || !c.IdleSince(c.Started()) {
		t.Fatal("IdleSince missed the starts, or saw one that did not happen")
	}
}
