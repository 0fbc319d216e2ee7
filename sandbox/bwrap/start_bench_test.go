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
// home, the program bound in, a pids limit) and runs one short process in
// it to its end, as a create does before its agent's own start-up. Run it
// as root to include the host uid's stage.
func BenchmarkOpenStart(b *testing.B) {
	p := New(Options{})
	if err := p.Probe(context.Background()); err != nil {
		b.Skipf("bwrap does not work here: %v", err)
	}
	for b.Loop() {
		cfg := berth.SandboxConfig{SessionID: "ses_bench", Workspace: b.TempDir(), Home: b.TempDir(),
			Binds:  []berth.Bind{{Source: sandboxtest.HostBusybox, Target: "/.berth/busybox"}},
			Limits: berth.SandboxLimits{Pids: 512}}
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
