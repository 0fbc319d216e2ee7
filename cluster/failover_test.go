package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/store/memory"
)

// fakeHandoff is the API server's forwarding client: it resumes the
// session on the fake sessions of the node asked, or answers unreachable.
type fakeHandoff struct {
	mu          sync.Mutex
	nodes       map[string]*fakeSessions
	asked       []string // node/session
	unreachable bool
}

func (h *fakeHandoff) ResumeOn(ctx context.Context, node, advertise, id string) error {
	h.mu.Lock()
	h.asked = append(h.asked, node+"/"+id)
	down := h.unreachable
	h.mu.Unlock()
	if down || advertise != "http://"+node+":7380" {
		return &berth.Error{Code: berth.EUnavailable, Message: "node " + node + " cannot be reached",
			Details: map[string]any{"reason": "unreachable"}}
	}
	_, err := h.nodes[node].ResumeSession(ctx, id)
	return err
}

func (h *fakeHandoff) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.asked)
}

// failoverCluster is nodes a, b and c on one store, b and c with failover
// on and the handoff h; a drives the sessions named (true: a managed
// workspace, false: a host path), b drives one session of its own.
func failoverCluster(t *testing.T, sessions map[string]bool) (a, b, c *Node, fb, fc *fakeSessions, h *fakeHandoff, clk *testenv.Clock) {
	t.Helper()
	ctx := context.Background()
	clk = newClock()
	st := memory.New()
	a, _ = testNode(t, st, "a", clk)
	b, fb = testNode(t, st.NewPeer(), "b", clk)
	c, fc = testNode(t, st.NewPeer(), "c", clk)
	h = &fakeHandoff{nodes: map[string]*fakeSessions{"b": fb, "c": fc}}
	for _, n := range []*Node{b, c} {
		n.opts.Failover = true
		n.SetHandoff(h)
	}
	now := time.Now().UTC()
	for id, managed := range sessions {
		ws := "/srv/code/" + id
		if managed {
			ws = "/var/lib/berth-a/workspaces/" + id
		}
		if err := st.CreateSession(ctx, &berth.Session{ID: id, RootID: id, Agent: "demo", State: berth.StateActive,
			Workspace: ws, ManagedWorkspace: managed, Labels: map[string]string{},
			CreatedAt: now, UpdatedAt: now, LastActivityAt: now}); err != nil {
			t.Fatal(err)
		}
		if err := a.Acquire(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	newSession(t, st, "ses_b")
	if err := b.Acquire(ctx, "ses_b"); err != nil {
		t.Fatal(err)
	}
	return a, b, c, fb, fc, h, clk
}

// loseA lets node a go silent past the TTL (3s) and every lease it held
// expire while b and c heartbeat, then runs one beat of b (which closes
// and moves a's sessions) and waits for the moves.
func loseA(t *testing.T, b, c *Node, clk *testenv.Clock) {
	t.Helper()
	ctx := context.Background()
	for range 2 {
		clk.Advance(2 * time.Second)
		for _, n := range []*Node{b, c} {
			if err := n.nodes.Heartbeat(ctx, n.ID(), clk.Now().UTC(), n.opts.TTL); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.beat(ctx)
	b.wg.Wait()
}

// With failover on, the node that closes a lost node's sessions moves
// each managed one, once, to the node least loaded as it goes (fewest
// sessions, counting those moved so far; ties to itself): here to c
// (none, b drives one), then to b itself (one each); the host-path
// session stays stopped/node_lost with a failure saying why. Another
// node's takeover after it moves nothing again.
func TestFailoverMovesEachSessionOnceToTheLeastLoaded(t *testing.T) {
	ctx := context.Background()
	_, b, c, fb, fc, h, clk := failoverCluster(t, map[string]bool{"ses_1": true, "ses_2": false, "ses_3": true})
	loseA(t, b, c, clk)

	if got := fb.resumes(); !slices.Equal(got, []string{"ses_3"}) {
		t.Fatalf("b resumed %v itself, want ses_3", got)
	}
	if got := h.calls(); !slices.Equal(got, []string{"c/ses_1"}) {
		t.Fatalf("b asked %v, want c to resume ses_1", got)
	}
	if got := append(fb.resumes(), fc.resumes()...); len(got) != 2 || slices.Contains(got, "ses_2") {
		t.Fatalf("resumed %v, want ses_1 and ses_3 once each", got)
	}
	s, err := b.store.GetSession(ctx, "ses_2")
	if err != nil || s.State != berth.StateStopped || s.StopReason != berth.StopNodeLost || s.Failure == nil ||
		s.Failure.Message != hostPathFailure {
		t.Fatalf("host-path session: %+v %v", s, err)
	}
	for _, id := range []string{"ses_1", "ses_3"} {
		if s, _ := b.store.GetSession(ctx, id); s.Failure != nil {
			t.Fatalf("%s moved with failure %+v", id, s.Failure)
		}
	}
	// c's takeover comes after: the sessions are stopped already, nothing
	// is closed or moved twice.
	c.beat(ctx)
	c.wg.Wait()
	if len(fc.close) != 0 || len(h.calls()) != 1 || len(fb.resumes())+len(fc.resumes()) != 2 {
		t.Fatalf("c's takeover: closed %v, handoffs %v, resumes %v %v", fc.close, h.calls(), fb.resumes(), fc.resumes())
	}
}

// A lease another node holds for a moment (closing a session of the
// same lost node) counts as its load, which can tie the nodes halfway
// through a sweep: the tie goes to the node given fewer of the sweep's
// trees, so the sweep still spreads. Here c holds one lease, b none:
// the first tree goes to b, the second (one each) to c, not to b again.
func TestFailoverSpreadsASweepAcrossTiedNodes(t *testing.T) {
	ctx := context.Background()
	_, b, c, fb, fc, h, clk := failoverCluster(t, map[string]bool{"ses_1": true, "ses_3": true})
	b.Release(ctx, "ses_b")
	if err := c.Acquire(ctx, "ses_b"); err != nil {
		t.Fatal(err)
	}
	loseA(t, b, c, clk)
	if len(fb.resumes()) != 1 || len(fc.resumes()) != 1 || len(h.calls()) != 1 {
		t.Fatalf("b resumed %v, c resumed %v (handoffs %v): want one each", fb.resumes(), fc.resumes(), h.calls())
	}
}

// A lost node's sessions are moved several at a time (a move is the new
// node restoring files and starting an agent: one after another, a node
// of a hundred sessions would take minutes to move), never more than
// moveWorkers, each still to the least loaded counting the moves under
// way: spread evenly between b and c.
func TestFailoverMovesSessionsAtOnce(t *testing.T) {
	managed := map[string]bool{}
	for i := range 8 {
		managed[fmt.Sprintf("ses_%d", i)] = true
	}
	_, b, c, fb, fc, _, clk := failoverCluster(t, managed)
	var mu sync.Mutex
	inFlight, most := 0, 0
	// Each resume waits, up to a bound, for another to be under way.
	gate := func() {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		deadline := time.Now().Add(500 * time.Millisecond)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := inFlight
			mu.Unlock()
			if n >= 2 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	fb.gate, fc.gate = gate, gate
	loseA(t, b, c, clk)
	if most < 2 || most > moveWorkers {
		t.Fatalf("at most %d moves at once, want 2..%d", most, moveWorkers)
	}
	// b drives one of its own: 9 sessions between b and c, 4 and 5.
	if nb, nc := len(fb.resumes()), len(fc.resumes()); nb+nc != 8 || max(nb+1, nc)-min(nb+1, nc) > 1 {
		t.Fatalf("b resumed %d (and drives one), c %d: not spread evenly", nb, nc)
	}
}

// The node chosen that cannot be reached: the node that closed the
// session resumes it itself.
func TestFailoverResumesHereWhenTheChosenNodeIsUnreachable(t *testing.T) {
	_, b, c, fb, fc, h, clk := failoverCluster(t, map[string]bool{"ses_1": true})
	h.unreachable = true
	loseA(t, b, c, clk)
	if got := h.calls(); len(got) != 1 || got[0] != "c/ses_1" {
		t.Fatalf("b asked %v, want c", got)
	}
	if got := fb.resumes(); !slices.Equal(got, []string{"ses_1"}) || len(fc.resumes()) != 0 {
		t.Fatalf("resumed on b %v, on c %v: want ses_1 on b", got, fc.resumes())
	}
}

// A resume refused because another node holds the session's lease for a
// moment (its takeover racing this one) is tried again.
func TestFailoverTriesAgainWhileAnotherNodeHoldsTheLease(t *testing.T) {
	_, b, c, _, fc, h, clk := failoverCluster(t, map[string]bool{"ses_1": true})
	fc.held = 2
	loseA(t, b, c, clk)
	if got := h.calls(); !slices.Equal(got, []string{"c/ses_1", "c/ses_1", "c/ses_1"}) || !slices.Equal(fc.resumes(), []string{"ses_1"}) {
		t.Fatalf("handoffs %v, resumed on c %v", got, fc.resumes())
	}
}

// failover = "stop": a lost node's sessions stay stopped/node_lost, none
// with a failure, none resumed.
func TestFailoverStopLeavesSessionsStopped(t *testing.T) {
	ctx := context.Background()
	_, b, c, fb, fc, h, clk := failoverCluster(t, map[string]bool{"ses_1": true, "ses_2": false})
	b.opts.Failover, c.opts.Failover = false, false
	loseA(t, b, c, clk)
	if len(fb.close) != 2 || len(fb.resumes())+len(fc.resumes()) != 0 || len(h.calls()) != 0 {
		t.Fatalf("closed %v, resumed %v %v, handoffs %v", fb.close, fb.resumes(), fc.resumes(), h.calls())
	}
	for _, id := range []string{"ses_1", "ses_2"} {
		if s, _ := b.store.GetSession(ctx, id); s.State != berth.StateStopped || s.Failure != nil {
			t.Fatalf("%s: %s failure %+v", id, s.State, s.Failure)
		}
	}
}

// leastLoaded takes the live node with the fewest sessions; of those
// tied, the one given fewer of the sweep's trees, then this node, else
// the first by id; a lost node never.
func TestLeastLoaded(t *testing.T) {
	nodes := []*berth.Node{{ID: "c", State: berth.NodeUp, Sessions: 3}, {ID: "a", State: berth.NodeLost},
		{ID: "d", State: berth.NodeUp, Sessions: 2}, {ID: "b", State: berth.NodeUp, Sessions: 2}}
	for _, tc := range []struct {
		self  string
		given map[string]int
		want  string
	}{{"c", nil, "b"}, {"d", nil, "d"}, {"x", nil, "b"}, {"d", map[string]int{"d": 1}, "b"}, {"d", map[string]int{"d": 1, "b": 1}, "d"}} {
		if n := leastLoaded(nodes, tc.given, tc.self); n.ID != tc.want {
			t.Errorf("seen from %s, given %v: %s, want %s", tc.self, tc.given, n.ID, tc.want)
		}
	}
	if n := leastLoaded(nodes[1:2], nil, "self"); n.ID != "self" {
		t.Fatalf("no live node: %s", n.ID)
	}
}

// addChild stores an active child of parent (a session of the store) in
// its parent's workspace, driven by node a.
func addChild(t *testing.T, a *Node, id, parent string) {
	t.Helper()
	ctx := context.Background()
	p, err := a.store.GetSession(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := a.store.CreateSession(ctx, &berth.Session{ID: id, ParentID: parent, RootID: cmp.Or(p.RootID, p.ID), Depth: p.Depth + 1,
		Agent: "demo", State: berth.StateActive, Workspace: p.Workspace, Labels: map[string]string{},
		CreatedAt: now, UpdatedAt: now, LastActivityAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := a.Acquire(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// parentsFirst fails unless each of got was resumed after its parent, on the
// same node (whose resumes are got).
func parentsFirst(t *testing.T, st berth.Store, got []string) {
	t.Helper()
	for i, id := range got {
		s, _ := st.GetSession(context.Background(), id)
		if s.ParentID != "" && !slices.Contains(got[:i], s.ParentID) {
			t.Fatalf("%s resumed before its parent %s, or on another node: %v", id, s.ParentID, got)
		}
	}
}

// A lost node's sessions move tree by tree: a tree (a root and the
// children it spawned, theirs too) goes whole to one node, the least
// loaded counting the whole tree (here the tree of four to c, which has
// none; then the tree of two to b, which drives one: b 3, c 4), its
// sessions resumed parents first (a child resumes only while its parent
// is active on its node), each once; the children's workspace (their
// root's, managed) does not keep them from moving.
func TestFailoverMovesATreeWholeToOneNodeParentsFirst(t *testing.T) {
	ctx := context.Background()
	a, b, c, fb, fc, h, clk := failoverCluster(t, map[string]bool{"ses_r1": true, "ses_r2": true})
	addChild(t, a, "ses_k1a", "ses_r1")
	addChild(t, a, "ses_k1b", "ses_r1")
	addChild(t, a, "ses_g1", "ses_k1a")
	addChild(t, a, "ses_k2", "ses_r2")
	loseA(t, b, c, clk)

	inB, inC := fb.resumes(), fc.resumes()
	slices.Sort(inB)
	if want := []string{"ses_k2", "ses_r2"}; !slices.Equal(inB, want) {
		t.Fatalf("b resumed %v, want %v", inB, want)
	}
	got := fc.resumes()
	parentsFirst(t, b.store, got)
	slices.Sort(got)
	if want := []string{"ses_g1", "ses_k1a", "ses_k1b", "ses_r1"}; !slices.Equal(got, want) {
		t.Fatalf("c resumed %v, want %v (handoffs %v)", got, want, h.calls())
	}
	parentsFirst(t, b.store, fb.resumes())
	for _, id := range append(inB, inC...) {
		if s, _ := b.store.GetSession(ctx, id); s.State != berth.StateActive || s.Failure != nil {
			t.Fatalf("%s: %s failure %+v", id, s.State, s.Failure)
		}
	}
}

// A child whose parent did not come back is not resumed: it stays
// stopped/node_lost with a failure naming its parent, and so do its own
// children; the parent whose resume failed (the store unreachable) stays
// stopped with no failure, for another try. A child whose parent was
// stopped before its node was lost (not closed with it) is not resumed
// either. The other tree moves.
func TestFailoverLeavesAChildStoppedWhenItsParentIsNotResumed(t *testing.T) {
	ctx := context.Background()
	a, b, c, fb, fc, _, clk := failoverCluster(t, map[string]bool{"ses_r1": true, "ses_r2": true, "ses_p0": true})
	addChild(t, a, "ses_k1", "ses_r1")
	addChild(t, a, "ses_g1", "ses_k1")
	addChild(t, a, "ses_o1", "ses_p0")
	// ses_p0 was stopped (and its lease given back) before a was lost.
	p0, _ := a.store.GetSession(ctx, "ses_p0")
	p0.State, p0.StopReason = berth.StateStopped, berth.StopUserRequested
	if err := a.store.UpdateSession(ctx, p0, berth.StateActive); err != nil {
		t.Fatal(err)
	}
	a.Release(ctx, "ses_p0")
	unreachable := berth.Errorf(berth.EUnavailable, "the object store cannot be reached")
	fb.fail = map[string]error{"ses_r1": unreachable}
	fc.fail = map[string]error{"ses_r1": unreachable}
	loseA(t, b, c, clk)

	if got := append(fb.resumes(), fc.resumes()...); !slices.Equal(got, []string{"ses_r2"}) {
		t.Fatalf("resumed %v, want ses_r2 alone", got)
	}
	if r1, _ := b.store.GetSession(ctx, "ses_r1"); r1.State != berth.StateStopped || r1.StopReason != berth.StopNodeLost || r1.Failure != nil {
		t.Fatalf("ses_r1: %s/%s failure %+v", r1.State, r1.StopReason, r1.Failure)
	}
	for id, parent := range map[string]string{"ses_k1": "ses_r1", "ses_g1": "ses_k1", "ses_o1": "ses_p0"} {
		s, _ := b.store.GetSession(ctx, id)
		if s.State != berth.StateStopped || s.StopReason != berth.StopNodeLost || s.Failure == nil ||
			s.Failure.Kind != berth.FailStartup || !strings.Contains(s.Failure.Message, "parent session "+parent+" was not resumed") {
			t.Fatalf("%s: %s/%s failure %+v", id, s.State, s.StopReason, s.Failure)
		}
	}
}

// Of two nodes racing for a lost node's tree, the one that takes its
// root's lease closes and moves it whole: the other, finding that lease
// held, leaves the whole tree alone (it would otherwise close a child,
// and move it without its parent), for treeWaits beats.
func TestFailoverTreeIsClosedByOneNode(t *testing.T) {
	ctx := context.Background()
	a, b, c, fb, _, _, clk := failoverCluster(t, map[string]bool{"ses_r1": true})
	addChild(t, a, "ses_k1", "ses_r1")
	for range 2 {
		clk.Advance(2 * time.Second)
		for _, n := range []*Node{b, c} {
			if err := n.nodes.Heartbeat(ctx, n.ID(), clk.Now().UTC(), n.opts.TTL); err != nil {
				t.Fatal(err)
			}
		}
	}
	// c is closing the tree: it holds its root's lease.
	if _, err := c.nodes.MarkLostNodes(ctx, clk.Now().UTC(), c.opts.TTL); err != nil {
		t.Fatal(err)
	}
	if err := c.Acquire(ctx, "ses_r1"); err != nil {
		t.Fatal(err)
	}
	b.beat(ctx)
	b.wg.Wait()
	if len(fb.close) != 0 || len(fb.resumes()) != 0 {
		t.Fatalf("b closed %v and resumed %v of a tree c is closing", fb.close, fb.resumes())
	}
	// c holding it on (it moved the root, and died before it closed the
	// child): after treeWaits beats b closes what is left, the child,
	// which does not move without its parent.
	for range treeWaits {
		b.beat(ctx)
		b.wg.Wait()
	}
	if !slices.Equal(fb.close, []string{"ses_k1"}) || !slices.Equal(fb.kept, []string{"ses_k1"}) || len(fb.resumes()) != 0 {
		t.Fatalf("b closed %v, kept stopped %v, resumed %v", fb.close, fb.kept, fb.resumes())
	}
}

// A tree one of whose leases has not expired yet (a child spawned after
// its node's last heartbeat) waits, whole, for a later beat: its root is
// not closed and moved without it.
func TestFailoverTreeWaitsForItsLastLease(t *testing.T) {
	ctx := context.Background()
	a, b, c, fb, fc, _, clk := failoverCluster(t, map[string]bool{"ses_r1": true, "ses_r2": true})
	addChild(t, a, "ses_k1", "ses_r1")
	// ses_k1's lease taken later than the others: it expires 2s later.
	if _, err := a.store.AcquireLease(ctx, "ses_k1", "a", clk.Now().UTC().Add(2*time.Second), a.opts.TTL); err != nil {
		t.Fatal(err)
	}
	loseA(t, b, c, clk)
	if got := append(fb.resumes(), fc.resumes()...); !slices.Equal(got, []string{"ses_r2"}) || slices.Contains(fb.close, "ses_r1") {
		t.Fatalf("before the child's lease expired: resumed %v, closed %v", got, fb.close)
	}
	clk.Advance(2 * time.Second)
	for _, n := range []*Node{b, c} {
		if err := n.nodes.Heartbeat(ctx, n.ID(), clk.Now().UTC(), n.opts.TTL); err != nil {
			t.Fatal(err)
		}
	}
	b.beat(ctx)
	b.wg.Wait()
	got := append(fb.resumes(), fc.resumes()...)
	slices.Sort(got)
	if !slices.Equal(got, []string{"ses_k1", "ses_r1", "ses_r2"}) {
		t.Fatalf("once it expired: resumed %v", got)
	}
}
