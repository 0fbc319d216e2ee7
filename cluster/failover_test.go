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
// tied, this node, else the first by id; a lost node never.
func TestLeastLoaded(t *testing.T) {
	nodes := []*berth.Node{{ID: "c", State: berth.NodeUp, Sessions: 3}, {ID: "a", State: berth.NodeLost},
		{ID: "d", State: berth.NodeUp, Sessions: 2}, {ID: "b", State: berth.NodeUp, Sessions: 2}}
	for _, tc := range []struct{ self, want string }{{"c", "b"}, {"d", "d"}, {"x", "b"}} {
		if n := leastLoaded(nodes, tc.self); n.ID != tc.want {
			t.Errorf("seen from %s: %s, want %s", tc.self, n.ID, tc.want)
		}
	}
	if n := leastLoaded(nodes[1:2], "self"); n.ID != "self" {
		t.Fatalf("no live node: %s", n.ID)
	}
}
