package session

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/sandbox/host"
	"github.com/berth-sh/berth/snapshot"
	"github.com/berth-sh/berth/store/memory"

	live "github.com/berth-sh/berth/session/live"
)

// leaseCluster is a Cluster of one node over a fenced store: what package
// cluster does, without its heartbeat.
type leaseCluster struct {
	store berth.Store
	node  string
	mu    sync.Mutex
	token map[string]int64
}

func (c *leaseCluster) Acquire(ctx context.Context, id string) error {
	l, err := c.store.AcquireLease(ctx, id, c.node, time.Now(), time.Hour)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.token[id] = l.Token
	c.mu.Unlock()
	return nil
}

func (c *leaseCluster) Release(ctx context.Context, id string) {
	c.mu.Lock()
	tok := c.token[id]
	c.mu.Unlock()
	_ = c.store.ReleaseLease(ctx, id, c.node, tok)
}

func (c *leaseCluster) Holds(ctx context.Context, id string) bool {
	l, err := c.store.GetLease(ctx, id)
	return err == nil && l.Owner == c.node
}

func (c *leaseCluster) Owners(ctx context.Context, ids []string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		if l, err := c.store.GetLease(ctx, id); err == nil && l.ExpiresAt.After(time.Now()) {
			out[id] = l.Owner
		}
	}
	return out
}

// A cluster node's session whose lease another node took over: the next
// write of it is refused by the store, and the node lets go of the session
// at once without writing anything (its agent killed, its live session gone);
// its reads show the new owner. Before that, the session is created and
// stopped under its lease, which the stop gives back.
func TestLeaseLostDropsTheRuntimeWithoutWriting(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	st := memory.New()
	st.Fence("n1")
	lg := eventlog.New(st, eventlog.Options{})
	if err := lg.Open(); err != nil {
		t.Fatal(err)
	}
	cl := &leaseCluster{store: st, node: "n1", token: map[string]int64{}}
	m := New(Options{Store: st, Log: lg, Catalog: catalog(), Providers: []berth.SandboxProvider{host.New()},
		Sandbox: SandboxPolicy{Default: berth.SandboxHost, AllowHost: true, AllowNetwork: true},
		Limits:  live.Limits{MaxPromptBytes: 256 << 10, HandshakeTimeout: 5 * time.Second, StopGrace: 2 * time.Second, CancelGrace: 2 * time.Second},
		Home:    home, NodeID: "n1", Version: "test", Snapshots: snapshot.New(filepath.Join(home, "snapshots")),
		Cluster: cl})
	if err := m.Open(ctx); err != nil {
		t.Fatal(err)
	}
	<-m.Booted()
	defer func() {
		_ = m.Close(ctx)
		_ = lg.Close(ctx)
	}()

	// Created and stopped under its lease.
	done, err := m.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil || done.Node != "n1" {
		t.Fatalf("create: %v node %q", err, done.Node)
	}
	if s, _ := m.StopSession(ctx, done.ID); s.State != berth.StateStopped || s.Node != "" {
		t.Fatalf("stopped: %s node %q", s.State, s.Node)
	}
	if _, err := st.GetLease(ctx, done.ID); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("the stop kept the lease: %v", err)
	}

	sess, err := m.CreateSession(ctx, berth.CreateRequest{Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := m.Prompt(ctx, sess.ID, berth.PromptRequest{Text: "echo one"}); err != nil {
		t.Fatal(err)
	} else if _, err := m.WaitTurn(ctx, sess.ID, r.TurnID); err != nil {
		t.Fatal(err)
	}
	stored, _ := st.GetSession(ctx, sess.ID)
	pid := stored.AgentPID
	if err := lg.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := st.ListEvents(ctx, sess.ID, berth.EventFilter{Limit: berth.MaxEventLimit})

	// Node n2 takes the lease over (as after n1 was lost: it had expired).
	other := st.NewPeer()
	other.Fence("n2")
	if _, err := other.AcquireLease(ctx, sess.ID, "n2", time.Now().Add(2*time.Hour), 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	// n1 writes on: refused, and it lets go.
	_, _ = m.Prompt(ctx, sess.ID, berth.PromptRequest{Text: "echo two"})
	waitFor(t, "the runtime dropped", func() bool { return !m.LiveIDs()[sess.ID] })
	waitFor(t, "the agent killed", func() bool { return syscall.Kill(pid, 0) != nil || processGone(pid) })
	after, _ := st.ListEvents(ctx, sess.ID, berth.EventFilter{Limit: berth.MaxEventLimit})
	if len(after) != len(before) {
		t.Fatalf("the node wrote after losing the lease: %d → %d events (%s)", len(before), len(after), after[len(before)].Type)
	}
	now, _ := st.GetSession(ctx, sess.ID)
	if !now.UpdatedAt.Equal(stored.UpdatedAt) || now.State != berth.StateActive {
		t.Fatalf("the session row moved: %s at %s (was %s)", now.State, now.UpdatedAt, stored.UpdatedAt)
	}
	if got, _ := m.GetSession(ctx, sess.ID); got.Node != "n2" {
		t.Fatalf("read after the takeover: node %q", got.Node)
	}
}

// KeepStopped records why a lost node's stopped session did not move: its
// failure, the session still stopped as it was closed (badge failed), its
// log unchanged; a session no longer stopped is left as it is.
func TestKeepStoppedRecordsTheFailure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	other := e.create(berth.CreateRequest{})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	before := len(e.events(s.ID))
	why := &berth.Failure{Kind: berth.FailStartup, Message: "its parent session ses_p was not resumed"}
	if err := e.m.KeepStopped(ctx, s.ID, why); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.GetSession(ctx, s.ID)
	if err != nil || got.State != berth.StateStopped || got.StopReason != berth.StopUserRequested || got.Failure == nil ||
		*got.Failure != *why || got.Badge != berth.BadgeFailed {
		t.Fatalf("kept stopped: %+v %v", got, err)
	}
	if n := len(e.events(s.ID)); n != before {
		t.Fatalf("the log grew from %d to %d events", before, n)
	}
	if err := e.m.KeepStopped(ctx, other.ID, why); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.GetSession(ctx, other.ID); got.State != berth.StateActive || got.Failure != nil {
		t.Fatalf("an active session: %s failure %+v", got.State, got.Failure)
	}
}
