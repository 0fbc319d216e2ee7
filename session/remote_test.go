package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/sandbox/host"
	"github.com/berth-sh/berth/snapshot"
	"github.com/berth-sh/berth/store/memory"

	live "github.com/berth-sh/berth/session/live"
)

// A session another node drives changes in the store; the notice of its
// commit makes this node's all-sessions stream carry it, as the store has
// it (with the node that drives it): created the first time (it is new),
// updated after; a notice that changes nothing publishes nothing.
func TestRemoteCommitPublishesTheSessionOnTheChangeStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := t.TempDir()
	st := memory.New()
	lg := eventlog.New(st, eventlog.Options{})
	if err := lg.Open(); err != nil {
		t.Fatal(err)
	}
	cl := &leaseCluster{store: st, node: "n1", token: map[string]int64{}}
	m := New(Options{Store: st, Log: lg, Catalog: catalog(), Providers: []berth.SandboxProvider{host.New()},
		Sandbox: SandboxPolicy{Default: berth.SandboxHost, AllowHost: true, AllowNetwork: true},
		Limits:  live.Limits{MaxPromptBytes: 256 << 10, HandshakeTimeout: 5 * time.Second},
		Home:    home, NodeID: "n1", Version: "test", Snapshots: snapshot.New(filepath.Join(home, "snapshots")),
		Cluster: cl, Changes: ChangeOptions{ActivityEvery: 10 * time.Millisecond}})
	if err := m.Open(ctx); err != nil {
		t.Fatal(err)
	}
	<-m.Booted()
	defer func() {
		_ = m.Close(ctx)
		_ = lg.Close(ctx)
	}()
	changes, err := m.StreamChanges(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer changes.Close()

	// Node n2 created the session and drives it.
	s := &berth.Session{ID: "ses_remote", Agent: "demo", State: berth.StateActive, Badge: berth.BadgeRunning, CreatedAt: time.Now().UTC()}
	if err := st.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, s.ID, "n2", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	m.RemoteCommitted(s.ID)
	got := nextChange(t, ctx, changes)
	var seen berth.Session
	// New here and new altogether: created, so that lists add it.
	if err := json.Unmarshal(got.Data, &seen); err != nil || got.Type != berth.ChangeSessionCreated || seen.ID != s.ID || seen.Node != "n2" || seen.State != berth.StateActive {
		t.Fatalf("change %s %s (%v)", got.Type, got.Data, err)
	}
	// Nothing changed: nothing is published; then n2 stops it.
	m.changes.publishRemote(ctx, s.ID)
	s.State, s.StopReason = berth.StateStopped, berth.StopUserRequested
	if err := st.UpdateSession(ctx, s, berth.StateActive); err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseLease(ctx, s.ID, "n2", 1); err != nil {
		t.Fatal(err)
	}
	m.RemoteCommitted(s.ID)
	got = nextChange(t, ctx, changes)
	seen = berth.Session{}
	if err := json.Unmarshal(got.Data, &seen); err != nil || got.Type != berth.ChangeSessionUpdated || seen.State != berth.StateStopped || seen.Node != "" {
		t.Fatalf("after the stop: %s (%v)", got.Data, err)
	}
}

// nextChange returns the next change of a stream, skipping resyncs; it
// fails when more than one change comes at once.
func nextChange(t *testing.T, ctx context.Context, st berth.ChangeStream) berth.SessionChange {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		cs, err := st.Next(ctx)
		if err != nil {
			t.Fatalf("no change: %v", err)
		}
		var out []berth.SessionChange
		for _, c := range cs {
			if c.Type != berth.ChangeResync {
				out = append(out, c)
			}
		}
		if len(out) > 1 {
			t.Fatalf("%d changes at once: %+v", len(out), out)
		}
		if len(out) == 1 {
			return out[0]
		}
	}
}
