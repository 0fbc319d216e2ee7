package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/store/memory"
)

// newClock returns the test clock the nodes of a test read, at a fixed
// time.
func newClock() *testenv.Clock {
	return testenv.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// fakeSessions is a node's session manager: it records what the node
// asks, and closes a lost session as the manager does (stopped/node_lost,
// written through the node's own fenced store).
type fakeSessions struct {
	store   berth.Store
	node    *Node // it takes the lease of a session it resumes
	mu      sync.Mutex
	lost    int // LoseSessions(nil) calls
	held    int // resumes to refuse first, the lease held by node "x"
	close   []string
	resumed []string
	kept    []string
	// fail are resumes that fail, by session id.
	fail map[string]error
	// gate, when set, runs first in each ResumeSession.
	gate func()
}

// KeepStopped records the failure of a stopped session, as the manager
// does.
func (f *fakeSessions) KeepStopped(ctx context.Context, id string, why *berth.Failure) error {
	if err := f.node.Acquire(ctx, id); err != nil {
		return err
	}
	defer f.node.Release(ctx, id)
	s, err := f.store.GetSession(ctx, id)
	if err != nil || s.State != berth.StateStopped {
		return err
	}
	s.Failure = why
	if err := f.store.UpdateSession(ctx, s, berth.StateStopped); err != nil {
		return err
	}
	f.mu.Lock()
	f.kept = append(f.kept, id)
	f.mu.Unlock()
	return nil
}

func (f *fakeSessions) LoseSessions(ids []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ids == nil {
		f.lost++
	}
}

func (f *fakeSessions) LiveIDs() map[string]bool { return map[string]bool{} }

func (f *fakeSessions) CloseLost(ctx context.Context, id string, _ map[string][]int, why func(*berth.Session) *berth.Failure) (*berth.Session, error) {
	s, err := f.store.GetSession(ctx, id)
	if err != nil || s.State == berth.StateStopped {
		return nil, err
	}
	from := s.State
	s.State, s.StopReason = berth.StateStopped, berth.StopNodeLost
	if why != nil {
		s.Failure = why(s)
	}
	if err := f.store.UpdateSession(ctx, s, from); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.close = append(f.close, id)
	f.mu.Unlock()
	return s, nil
}

// ResumeSession records the resume and makes the session active, under
// its lease, as the manager's resume does: a child only while its parent
// is active on this node.
func (f *fakeSessions) ResumeSession(ctx context.Context, id string) (*berth.Session, error) {
	if f.gate != nil {
		f.gate()
	}
	s, err := f.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.State != berth.StateStopped {
		return nil, berth.Errorf(berth.EConflict, "session is %s, not stopped", s.State)
	}
	if s.ParentID != "" {
		p, err := f.store.GetSession(ctx, s.ParentID)
		if err != nil {
			return nil, err
		}
		if l, err := f.store.GetLease(ctx, p.ID); err != nil || p.State != berth.StateActive || l.Owner != f.node.ID() {
			return nil, berth.Errorf(berth.EConflict, "the parent session is not active: resume the parent first")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[id]; err != nil {
		return nil, err
	}
	if f.held > 0 {
		f.held--
		return nil, fmt.Errorf("take the session's lease: %w", &berth.Error{Code: berth.EConflict,
			Message: "session " + id + " is driven by node x", Details: map[string]any{"node": "x"}})
	}
	if err := f.node.Acquire(ctx, id); err != nil {
		return nil, err
	}
	s.State = berth.StateActive
	if err := f.store.UpdateSession(ctx, s, berth.StateStopped); err != nil {
		return nil, err
	}
	f.resumed = append(f.resumed, id)
	return s, nil
}

// resumes returns the sessions resumed so far.
func (f *fakeSessions) resumes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.resumed)
}

// testNode makes a joined node over st, its beats driven by the test.
func testNode(t *testing.T, st *memory.Store, id string, clk *testenv.Clock) (*Node, *fakeSessions) {
	t.Helper()
	n, err := New(Options{ID: id, Advertise: "http://" + id + ":7380", TTL: 3 * time.Second, Token: "tok", Store: st, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Join(context.Background()); err != nil {
		t.Fatal(err)
	}
	fs := &fakeSessions{store: st, node: n}
	n.sessions = fs
	return n, fs
}

// newSession stores an active session.
func newSession(t *testing.T, st berth.Store, id string) {
	t.Helper()
	now := time.Now().UTC()
	if err := st.CreateSession(context.Background(), &berth.Session{ID: id, RootID: id, Agent: "demo", State: berth.StateActive,
		Labels: map[string]string{}, CreatedAt: now, UpdatedAt: now, LastActivityAt: now}); err != nil {
		t.Fatal(err)
	}
}

// soloNode is node a alone on a new store, on a newClock, with session
// ses_1 stored but not acquired.
func soloNode(t *testing.T) (*Node, *fakeSessions, *memory.Store, *testenv.Clock) {
	t.Helper()
	clk := newClock()
	st := memory.New()
	a, fa := testNode(t, st, "a", clk)
	newSession(t, st, "ses_1")
	return a, fa, st, clk
}

// A node silent for the TTL is marked lost by another, which closes its
// sessions (node_lost) once each lease has expired, under a lease taken
// over; the lost node's writes are refused from then on; its next
// heartbeat tells it it is lost: it lets go of every session and joins
// again, holding none of them.
func TestLostNodesSessionsAreClosedByAnother(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	stA := memory.New()
	stB := stA.NewPeer()
	a, fa := testNode(t, stA, "a", clk)
	b, fb := testNode(t, stB, "b", clk)
	newSession(t, stA, "ses_1")
	if err := a.Acquire(ctx, "ses_1"); err != nil {
		t.Fatal(err)
	}
	// B may not take a session A drives.
	err := b.Acquire(ctx, "ses_1")
	if !berth.IsCode(err, berth.EConflict) || berth.ErrorDetails(err)["node"] != "a" {
		t.Fatalf("B acquiring A's session: %v %v", err, berth.ErrorDetails(err))
	}
	if node, adv, err := b.Owner(ctx, "ses_1"); err != nil || node != "a" || adv != "http://a:7380" {
		t.Fatalf("owner seen by B = %q %q %v", node, adv, err)
	}
	clk.Advance(time.Second)
	a.beat(ctx)
	b.beat(ctx)
	// Holds renews, as the heartbeat just did.
	if !a.Holds(ctx, "ses_1") || b.Holds(ctx, "ses_1") {
		t.Fatal("Holds: A should hold ses_1, B should not")
	}
	// A second session, leased just after A's last heartbeat: its lease
	// outlives the heartbeat by up to the TTL.
	clk.Advance(time.Second)
	newSession(t, stA, "ses_2")
	if err := a.Acquire(ctx, "ses_2"); err != nil {
		t.Fatal(err)
	}
	if got := b.Owners(ctx, []string{"ses_1", "ses_2", "ses_x"}); got["ses_1"] != "a" || got["ses_2"] != "a" || len(got) != 2 {
		t.Fatalf("owners = %v", got)
	}

	// A goes silent: 3.5s after its last heartbeat it is lost; ses_1's
	// lease (renewed at that heartbeat) has expired, ses_2's has not.
	clk.Advance(2500 * time.Millisecond)
	b.beat(ctx)
	if len(fb.close) != 1 || fb.close[0] != "ses_1" {
		t.Fatalf("B closed %v, want ses_1 alone", fb.close)
	}
	clk.Advance(time.Second)
	b.beat(ctx)
	if len(fb.close) != 2 || fb.close[1] != "ses_2" {
		t.Fatalf("B closed %v, want ses_2 next", fb.close)
	}
	for _, id := range []string{"ses_1", "ses_2"} {
		s, _ := stB.GetSession(ctx, id)
		if s.State != berth.StateStopped || s.StopReason != berth.StopNodeLost {
			t.Fatalf("%s: %s/%s", id, s.State, s.StopReason)
		}
		if _, err := stB.GetLease(ctx, id); !berth.IsCode(err, berth.ENotFound) {
			t.Fatalf("%s: the lease was not given back: %v", id, err)
		}
	}
	if got := b.Owners(ctx, []string{"ses_1"}); len(got) != 0 {
		t.Fatalf("a stopped session has an owner: %v", got)
	}
	// A, back, is fenced out: what it writes of its old sessions is refused.
	s, _ := stA.GetSession(ctx, "ses_1")
	s.Name = "stale"
	if err := stA.UpdateSession(ctx, s, ""); !berth.IsCode(err, berth.ELeaseLost) {
		t.Fatalf("a lost node's write: %v", err)
	}
	a.beat(ctx)
	if fa.lost != 1 {
		t.Fatalf("A let go of its sessions %d times, want 1", fa.lost)
	}
	nodes, _ := b.Nodes(ctx)
	if len(nodes) != 2 || nodes[0].State != berth.NodeUp || nodes[1].State != berth.NodeUp {
		t.Fatalf("nodes after A joined again: %+v %+v", nodes[0], nodes[1])
	}
	if a.Holds(ctx, "ses_1") {
		t.Fatal("A holds a session it lost")
	}
}

// A node whose heartbeats fail for the TTL (the store unreachable) lets
// go of its sessions: the others take it for lost by then.
func TestSilentNodeLetsGo(t *testing.T) {
	ctx := context.Background()
	a, fa, st, clk := soloNode(t)
	if err := a.Acquire(ctx, "ses_1"); err != nil {
		t.Fatal(err)
	}
	registry := a.nodes
	a.nodes = failingBeats{registry}
	clk.Advance(2 * time.Second)
	a.beat(ctx)
	if fa.lost != 0 {
		t.Fatal("let go before the TTL")
	}
	clk.Advance(1500 * time.Millisecond)
	a.beat(ctx)
	if fa.lost != 1 {
		t.Fatalf("let go %d times after the TTL without a heartbeat, want 1", fa.lost)
	}
	// The store back before any other node marked A lost: A closes what
	// it let go of (it still holds the lease), so nothing stays active
	// with no node driving it.
	a.nodes = registry
	clk.Advance(time.Second)
	a.beat(ctx)
	if len(fa.close) != 1 || fa.close[0] != "ses_1" {
		t.Fatalf("closed after the store came back: %v", fa.close)
	}
	if _, err := st.GetLease(ctx, "ses_1"); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("the lease was not given back: %v", err)
	}
}

// failingBeats is a node registry whose heartbeats fail.
type failingBeats struct{ berth.NodeStore }

func (failingBeats) Heartbeat(context.Context, string, time.Time, time.Duration) error {
	return berth.Errorf(berth.EUnavailable, "store unreachable")
}

// A store that keeps no node registry or cannot fence cannot be shared.
func TestNewRefusesAStoreWithoutRegistry(t *testing.T) {
	if _, err := New(Options{ID: "a", TTL: time.Second, Store: plainStore{memory.New()}}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("New over a store without registry: %v", err)
	}
}

// plainStore hides every optional capability of a store.
type plainStore struct{ berth.Store }

// Users of one lease on one node (a takeover and a resume, a write to a
// stopped session and a resume) overlap: the lease goes back when the
// last one releases it, never under another's feet.
func TestLeaseGoesBackWithItsLastUser(t *testing.T) {
	ctx := context.Background()
	a, _, st, _ := soloNode(t)
	for range 2 {
		if err := a.Acquire(ctx, "ses_1"); err != nil {
			t.Fatal(err)
		}
	}
	a.Release(ctx, "ses_1")
	if l, err := st.GetLease(ctx, "ses_1"); err != nil || l.Owner != "a" {
		t.Fatalf("after one of two releases: %+v %v", l, err)
	}
	s, _ := st.GetSession(ctx, "ses_1")
	if err := st.UpdateSession(ctx, s, ""); err != nil {
		t.Fatalf("the remaining user's write: %v", err)
	}
	a.Release(ctx, "ses_1")
	if _, err := st.GetLease(ctx, "ses_1"); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("after the last release: %v", err)
	}
}
