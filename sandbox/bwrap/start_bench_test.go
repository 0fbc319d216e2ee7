package bwrap

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// BenchmarkOpenStart opens a sandbox the way a session's is (workspace,
// home, the program bound in, the default pids, memory and /tmp limits)
// and runs one short process in it to its end, as a create does before
// its agent's own start-up. Run it as root to include the host uid's
// stage. BenchmarkOpenStartPidsOnly is the same with a pids limit alone
// (no memory cgroup), for the memory cgroup's cost.
func BenchmarkOpenStart(b *testing.B) {
	benchOpenStart(b, berth.SandboxLimits{Pids: 512, MemoryBytes: 2048 << 20, TmpBytes: 256 << 20}, false)
}

// BenchmarkOpenStartPidsOnly is BenchmarkOpenStart without the memory and
// /tmp limits.
func BenchmarkOpenStartPidsOnly(b *testing.B) {
	benchOpenStart(b, berth.SandboxLimits{Pids: 512}, false)
}

// BenchmarkOpenStartNetwork is BenchmarkOpenStartPidsOnly with network
// on: slirp4netns and, for a daemon that is not root, the user and
// network namespace the daemon makes for the outer bwrap.
func BenchmarkOpenStartNetwork(b *testing.B) {
	if slirpPath() == "" {
		b.Skip("slirp4netns is not installed")
	}
	benchOpenStart(b, berth.SandboxLimits{Pids: 512}, true)
}

// benchOpenStart opens a sandbox with lim (and network when asked) and
// runs busybox true in it, b.N times.
func benchOpenStart(b *testing.B, lim berth.SandboxLimits, network bool) {
	p := New(Options{})
	if err := p.Probe(context.Background()); err != nil {
		b.Skipf("bwrap does not work here: %v", err)
	}
	if lim.MemoryBytes > 0 && p.LimitsMemory() != nil {
		b.Skipf("no memory cgroup here: %v", p.LimitsMemory())
	}
	for b.Loop() {
		cfg := berth.SandboxConfig{SessionID: "ses_bench", Workspace: b.TempDir(), Home: b.TempDir(),
			Binds:  []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"}},
			Limits: lim, Network: network}
		sb, err := p.Open(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		proc, err := sb.Start(context.Background(), berth.ProcSpec{Path: "/.berth/busybox", Args: []string{"true"},
			Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		if st, err := proc.Wait(); err != nil || !st.Success() {
			b.Fatalf("%+v %v", st, err)
		}
		if err := sb.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
