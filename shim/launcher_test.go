package shim

import (
	"testing"
	"time"
)

// idleCount is how many spares the launcher holds.
func idleCount(l *Launcher) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.idle)
}

// waitIdle polls until the launcher holds n spares.
func waitIdle(t *testing.T, l *Launcher, n int) {
	t.Helper()
	deadline := time.Now().Add(long)
	for idleCount(l) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the launcher holds %d spares, want %d", idleCount(l), n)
		}
		time.Sleep(poll)
	}
}

// Replenish starts the spare that replaces a taken one at once, not after
// refillDelay (made an hour here: only Replenish can start it).
func TestReplenishStartsTheSpareAtOnce(t *testing.T) {
	defer func(d time.Duration) { refillDelay = d }(refillDelay)
	refillDelay = time.Hour
	// A stand-in for the shim: a spare only waits for its job on stdin.
	l := NewLauncher([]string{"/bin/sh", "-c", "cat >/dev/null"}, nil, t.TempDir(), 1)
	defer l.Close()
	l.Replenish()
	waitIdle(t, l, 1)
	for range 3 {
		sp, err := l.take()
		if err != nil {
			t.Fatal(err)
		}
		retire(sp)
		if n := idleCount(l); n != 0 {
			t.Fatalf("%d spares right after one was taken", n)
		}
		l.Replenish()
		waitIdle(t, l, 1)
	}
}
