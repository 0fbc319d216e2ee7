package shim

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A shim with a daemon attached outlives the orphan timeout and the loss
// of its run directory: the daemon decides its end. Once the daemon
// detaches, the shim looks again: it stops its agent and exits.
func TestWatchLooksOnlyWhileDetached(t *testing.T) {
	for _, c := range []struct {
		name   string
		orphan time.Duration
		// gone makes the shim one nothing can reattach.
		gone func(t *testing.T, cfg Config)
	}{
		{"orphan timeout", 200 * time.Millisecond, func(*testing.T, Config) {}},
		{"run directory gone", time.Hour, func(t *testing.T, cfg Config) {
			// The socket and spool stay open; their names go.
			if err := os.RemoveAll(filepath.Dir(cfg.Socket)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := newConfig(t, echoScript)
			cfg.Orphan = c.orphan
			cfg.Look = 50 * time.Millisecond
			h := serve(t, cfg)
			d := h.attach(0)
			d.barrier("1")
			c.gone(t, cfg)
			// The control: attached, the shim sees neither for a while
			// (many looks of a detached shim, 50 ms apart).
			if waitClosed(h.done, 3*time.Second) {
				t.Fatal("the shim exited with its daemon attached")
			}
			d.Detach()
			if err := h.waitServe(long); err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

// A shim whose daemon just went does not look for a while: a restart's
// reattach is not met by every shim of the daemon waking at once. It
// looks later (TestWatchLooksOnlyWhileDetached, with a short Look).
func TestADetachedShimLetsARestartGoBy(t *testing.T) {
	cfg := newConfig(t, echoScript)
	cfg.Orphan = time.Hour
	h := serve(t, cfg)
	d := h.attach(0)
	d.barrier("1")
	d.Detach()
	if err := os.RemoveAll(filepath.Dir(cfg.Socket)); err != nil {
		t.Fatal(err)
	}
	if waitClosed(h.done, 3*time.Second) {
		t.Fatalf("the shim looked within 3 s of its daemon going (every %s)", watchEvery)
	}
}
