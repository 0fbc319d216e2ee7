package session

import (
	"context"
	"time"

	"github.com/berth-sh/berth/internal/inflight"
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
type readGate struct{ inflight.Count }

// wait returns once no read is in flight, after max, or when ctx ends.
func (g *readGate) wait(ctx context.Context, max time.Duration) {
	idle := g.Idle()
	select {
	case <-idle:
		return
	default:
	}
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
func (m *Manager) Reading() (done func()) { return m.reads.Start() }
