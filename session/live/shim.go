package live

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// ShimOptions say how agents are started in shims (see package shim), so
// that they outlive the daemon.
type ShimOptions struct {
	// Argv runs the berth binary's shim command, for every provider the
	// Programs before it do not serve (see shim.Launcher); Env is added to
	// the daemon's environment for them.
	Argv []string
	// Programs, when set, gives those programs; it is called once, when
	// the first shim is started, and may wait for them to be installed.
	Programs func() []shim.Program
	Env      []string
	// Spare is how many idle shims are kept started ahead (default 1; -1
	// for none).
	Spare int
	// Linger bounds how long a shim whose agent exited waits for a daemon.
	Linger time.Duration
	// Orphan bounds how long a shim keeps a live agent with no daemon
	// attached.
	Orphan time.Duration
}

// Detach lets go of an agent that runs in a shim, leaving it running for
// the next daemon: nothing more is recorded, the turn in flight stays open
// and pending permissions stay pending. It returns once the live session's
// goroutines are done. A live session without a shim, or not active, is stopped.
func (ls *Session) Detach(ctx context.Context) {
	// A permission being recorded is logged before the agent is let go.
	ls.recordMu.Lock()
	ls.mu.Lock()
	active := ls.shim != nil && ls.sess.State == berth.StateActive && ls.stopReason == "" && !ls.exited
	if active {
		// From here nothing reaches the agent and nothing is recorded:
		// timers that would decide or kill for this daemon are stopped.
		ls.detached.Store(true)
		ls.shim.MarkDetached()
		ls.life.stopTimersLocked()
	}
	ls.mu.Unlock()
	ls.recordMu.Unlock()
	if !active {
		ls.Stop(ctx, berth.StopDaemonShutdown, nil)
		return
	}
	ls.shim.Detach()
	select {
	case <-ls.life.finished:
	case <-ctx.Done():
	}
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
