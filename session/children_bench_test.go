package session

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/sandbox/host"
	"github.com/berth-sh/berth/store/sqlite"

	live "github.com/berth-sh/berth/session/live"
)

// benchManager opens a manager like newEnv's, for benchmarks.
func benchManager(b *testing.B) *Manager {
	b.Helper()
	ctx := context.Background()
	home := b.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(home, "berth.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	lg := eventlog.New(st, eventlog.Options{})
	if err := lg.Open(); err != nil {
		b.Fatal(err)
	}
	m := New(Options{Store: st, Log: lg, Catalog: catalog(), Providers: []berth.SandboxProvider{host.New()},
		Sandbox: SandboxPolicy{Default: berth.SandboxHost, AllowHost: true},
		Limits:  live.Limits{HandshakeTimeout: 5 * time.Second, StopGrace: 2 * time.Second, MaxChildren: 1000},
		Home:    home})
	if err := m.Open(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = m.Close(ctx)
		_ = lg.Close(ctx)
		_ = st.Close()
	})
	return m
}

// BenchmarkCreateToActive is a root session's create, to its answer
// (active), the baseline of BenchmarkSpawnToActive.
func BenchmarkCreateToActive(b *testing.B) {
	m := benchManager(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := m.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
		if err != nil || s.State != berth.StateActive {
			b.Fatalf("create: %v %v", s, err)
		}
		b.StopTimer()
		_, _ = m.StopSession(ctx, s.ID)
		b.StartTimer()
	}
}

// BenchmarkSpawnToActive is a child's spawn, to its answer (active): the
// narrowing, the admission under the parent's lock and child_started on
// top of a create.
func BenchmarkSpawnToActive(b *testing.B) {
	m := benchManager(b)
	ctx := context.Background()
	parent, err := m.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		s, err := m.SpawnChild(ctx, parent.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 600}, "")
		if err != nil || s.State != berth.StateActive {
			b.Fatalf("spawn: %v %v", s, err)
		}
		b.StopTimer()
		_, _ = m.StopSession(ctx, s.ID)
		b.StartTimer()
	}
}
