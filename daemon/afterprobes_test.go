package daemon

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/session/probe"
	"github.com/berth-sh/berth/shim"
)

// heldProbe is a sandbox provider whose probe answers once release is
// closed.
type heldProbe struct {
	berth.SandboxProvider
	release chan struct{}
}

func (h heldProbe) Probe(context.Context) error {
	<-h.release
	return nil
}

// The small shim is installed once the sandbox probes are over, not
// beside them; a daemon closed before they are over installs nothing.
func TestTheShimIsInstalledAfterTheProbes(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		release := make(chan struct{})
		d := &Daemon{closing: make(chan struct{}),
			probes: probe.New(map[string]berth.SandboxProvider{"held": heldProbe{release: release}})}
		d.probes.Start(context.Background())
		var installs atomic.Int32
		o := Options{SmallShim: func(self, home, options string, logger *slog.Logger) []shim.Program {
			installs.Add(1)
			return nil
		}}
		d.installing.Go(func() { d.afterProbes(o) })
		time.Sleep(50 * time.Millisecond)
		if n := installs.Load(); n != 0 {
			t.Fatalf("installed %d times while the probe runs", n)
		}
		if closeFirst {
			close(d.closing)
			d.installing.Wait()
			close(release)
		} else {
			close(release)
			d.installing.Wait()
		}
		if n, want := installs.Load(), map[bool]int32{false: 1, true: 0}[closeFirst]; n != want {
			t.Fatalf("closed first %v: installed %d times, want %d", closeFirst, n, want)
		}
	}
}
