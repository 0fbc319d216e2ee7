package session

import (
	"context"
	"sync"
	"time"
)

// readYieldMax bounds how long a boot's reattach waits for the reads in
// flight: a read that takes longer (a slow client, a large page) does
// not hold the boot up past it.
const readYieldMax = 100 * time.Millisecond

// readGate counts the API's short reads in flight, so that a boot's
// reattach, which can keep a small machine's cores busy for seconds,
// lets each read through first: a user who opens the UI as the daemon
// comes back sees their sessions listed at once, not once the last one
// is reattached.
type readGate struct {
	mu sync.Mutex
	n  int
	// idle is closed when n falls to 0; a new one is made as n leaves 0.
	idle chan struct{}
}

// start counts a read in; the function it returns counts it out.
func (g *readGate) start() (done func()) {
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.n--
			if g.n == 0 {
				close(g.idle)
			}
			g.mu.Unlock()
		})
	}
}

// wait returns once no read is in flight, after max, or when ctx ends.
func (g *readGate) wait(ctx context.Context, max time.Duration) {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return
	}
	idle := g.idle
	g.mu.Unlock()
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Reading counts a short API read in flight (see readGate); the function
// it returns ends it. The HTTP server calls it for each.
func (m *Manager) Reading() (done func()) { return m.reads.start() }
