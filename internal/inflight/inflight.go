// Package inflight counts pieces of work in flight, so that other work
// can wait for none to be: a daemon's background work giving way to what
// a user waits for.
package inflight

import "sync"

// Count counts work in flight. The zero value counts none.
type Count struct {
	mu      sync.Mutex
	n       int
	started uint64
	// idle is closed while n is 0; nil until the first Start.
	idle chan struct{}
}

// closed is the Idle of a Count that never started anything.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Start counts one piece of work in until done is called (once or more:
// only the first counts).
func (c *Count) Start() (done func()) {
	c.mu.Lock()
	if c.n == 0 {
		c.idle = make(chan struct{})
	}
	c.n++
	c.started++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			if c.n--; c.n == 0 {
				close(c.idle)
			}
			c.mu.Unlock()
		})
	}
}

// Idle returns a channel closed once nothing is in flight (closed already
// when nothing is).
func (c *Count) Idle() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle == nil {
		return closed
	}
	return c.idle
}

// InFlight reports how many pieces of work are in flight.
func (c *Count) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Started reports how many pieces of work Start has ever counted in.
func (c *Count) Started() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// IdleSince reports whether nothing is in flight and nothing started
// since Started reported started.
func (c *Count) IdleSince(started uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started == started && c.n == 0
}
