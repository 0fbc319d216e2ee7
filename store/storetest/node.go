package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// nodeStore returns s as a berth.NodeStore, skipping the test when the
// backend has no node registry.
func nodeStore(t *testing.T, s berth.Store) berth.NodeStore {
	t.Helper()
	ns, ok := s.(berth.NodeStore)
	if !ok {
		t.Skipf("%s has no node registry", s.Name())
	}
	return ns
}

// register registers a node started at start, or fails the test.
func register(t *testing.T, ns berth.NodeStore, id string, start time.Time) {
	t.Helper()
	n := &berth.Node{ID: id, Advertise: "http://" + id + ".test:8080", StartedAt: start}
	if err := ns.RegisterNode(ctx(t), n, start); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	if n.State != berth.NodeUp || !n.LastHeartbeat.Equal(start) {
		t.Fatalf("register %s: the node reads %+v, want up with a heartbeat at %v", id, n, start)
	}
}

// nodesByID lists the nodes, keyed by id, or fails the test.
func nodesByID(t *testing.T, ns berth.NodeStore) ([]string, map[string]*berth.Node) {
	t.Helper()
	nodes, err := ns.ListNodes(ctx(t))
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	ids := make([]string, len(nodes))
	by := map[string]*berth.Node{}
	for i, n := range nodes {
		ids[i], by[n.ID] = n.ID, n
	}
	return ids, by
}

// leaseIDs returns the sessions of the leases owner holds, sorted.
func leaseIDs(t *testing.T, ns berth.NodeStore, owner string) []string {
	t.Helper()
	ls, err := ns.LeasesOf(ctx(t), owner)
	if err != nil {
		t.Fatalf("leases of %s: %v", owner, err)
	}
	ids := make([]string, len(ls))
	for i, l := range ls {
		if l.Owner != owner || l.Token < 1 {
			t.Fatalf("leases of %s: %+v", owner, l)
		}
		ids[i] = l.SessionID
	}
	slices.Sort(ids)
	return ids
}

// acquire takes a session's lease or fails the test.
func acquire(t *testing.T, s berth.Store, id, owner string, now time.Time, ttl time.Duration) *berth.Lease {
	t.Helper()
	l, err := s.AcquireLease(ctx(t), id, owner, now, ttl)
	if err != nil {
		t.Fatalf("%s acquires %s: %v", owner, id, err)
	}
	return l
}

// testNodeRegistry: nodes register, list oldest first with what they
// registered, and registering again updates the row in place.
func testNodeRegistry(t *testing.T, open Opener) {
	s := fresh(t, open)
	ns := nodeStore(t, s)
	if ids, _ := nodesByID(t, ns); len(ids) != 0 {
		t.Fatalf("a new store lists nodes %v", ids)
	}
	wantCode(t, ns.RegisterNode(ctx(t), &berth.Node{Advertise: "http://x"}, base), berth.EInvalid)
	wantCode(t, ns.RegisterNode(ctx(t), nil, base), berth.EInvalid)

	register(t, ns, "b", base.Add(time.Second))
	register(t, ns, "a", base.Add(2*time.Second))
	register(t, ns, "c", base)
	ids, by := nodesByID(t, ns)
	if !slices.Equal(ids, []string{"c", "b", "a"}) {
		t.Fatalf("nodes %v, want oldest first [c b a]", ids)
	}
	a := by["a"]
	if a.Advertise != "http://a.test:8080" || a.State != berth.NodeUp || !a.StartedAt.Equal(base.Add(2*time.Second)) ||
		!a.LastHeartbeat.Equal(base.Add(2*time.Second)) || a.Sessions != 0 {
		t.Fatalf("node a reads %+v", a)
	}

	// A restart registers again: new address, start and heartbeat, one row.
	later := base.Add(time.Minute)
	if err := ns.RegisterNode(ctx(t), &berth.Node{ID: "a", Advertise: "http://a2.test:9090", StartedAt: later}, later); err != nil {
		t.Fatal(err)
	}
	ids, by = nodesByID(t, ns)
	if !slices.Equal(ids, []string{"c", "b", "a"}) || by["a"].Advertise != "http://a2.test:9090" ||
		!by["a"].StartedAt.Equal(later) || !by["a"].LastHeartbeat.Equal(later) {
		t.Fatalf("after a re-register: %v, a = %+v", ids, by["a"])
	}
}

// testNodeHeartbeat: a heartbeat moves the node's heartbeat and renews, at
// once, every lease the node holds, and only those.
func testNodeHeartbeat(t *testing.T, open Opener) {
	s := fresh(t, open)
	ns := nodeStore(t, s)
	ttl := 10 * time.Second
	wantCode(t, ns.Heartbeat(ctx(t), "nobody", base, ttl), berth.ENotFound)
	register(t, ns, "a", base)
	register(t, ns, "b", base)
	create(t, s, newSession("s1", base), newSession("s2", base), newSession("s3", base), newSession("free", base))
	la := acquire(t, s, "s1", "a", base, ttl)
	acquire(t, s, "s2", "a", base, ttl)
	lb := acquire(t, s, "s3", "b", base, ttl)
	// A released lease is not the node's any more.
	lf := acquire(t, s, "free", "a", base, ttl)
	if err := s.ReleaseLease(ctx(t), "free", "a", lf.Token); err != nil {
		t.Fatal(err)
	}

	now := base.Add(7 * time.Second)
	if err := ns.Heartbeat(ctx(t), "a", now, ttl); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	for _, id := range []string{"s1", "s2"} {
		l, err := s.GetLease(ctx(t), id)
		if err != nil || l.Owner != "a" || !l.ExpiresAt.Equal(now.Add(ttl)) {
			t.Fatalf("lease of %s after a's heartbeat: %+v, %v; want a's until %v", id, l, err, now.Add(ttl))
		}
		if id == "s1" && l.Token != la.Token {
			t.Fatalf("a heartbeat changed the token of s1: %d, was %d", l.Token, la.Token)
		}
	}
	if l, err := s.GetLease(ctx(t), "s3"); err != nil || l.Owner != "b" || !l.ExpiresAt.Equal(lb.ExpiresAt) {
		t.Fatalf("b's lease after a's heartbeat: %+v, %v", l, err)
	}
	_, err := s.GetLease(ctx(t), "free")
	wantCode(t, err, berth.ENotFound)
	_, by := nodesByID(t, ns)
	if !by["a"].LastHeartbeat.Equal(now) || !by["b"].LastHeartbeat.Equal(base) {
		t.Fatalf("heartbeats: a %v, b %v", by["a"].LastHeartbeat, by["b"].LastHeartbeat)
	}
	if by["a"].Sessions != 2 || by["b"].Sessions != 1 {
		t.Fatalf("sessions per node: a %d, b %d; want 2 and 1", by["a"].Sessions, by["b"].Sessions)
	}
	if got := leaseIDs(t, ns, "a"); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("leases of a: %v", got)
	}
	if got := leaseIDs(t, ns, "nobody"); len(got) != 0 {
		t.Fatalf("leases of an unknown node: %v", got)
	}
	// The leases are live: another node cannot take them within the ttl.
	_, err = s.AcquireLease(ctx(t), "s1", "b", now.Add(ttl-time.Second), ttl)
	wantCode(t, err, berth.EConflict)
}

// testNodeMarkLost: a node that missed its heartbeats for the ttl is marked
// lost once; it learns so at its next heartbeat; its leases stay its own
// (for the taker to find) and are never renewed by the node again, even
// after it registers anew, so another node takes them over.
func testNodeMarkLost(t *testing.T, open Opener) {
	s := fresh(t, open)
	ns := nodeStore(t, s)
	ttl := 10 * time.Second
	register(t, ns, "a", base)
	register(t, ns, "b", base)
	create(t, s, newSession("s1", base), newSession("s2", base))
	old1 := acquire(t, s, "s1", "a", base, ttl)
	old2 := acquire(t, s, "s2", "a", base, ttl)

	// b keeps beating; a stops.
	if err := ns.Heartbeat(ctx(t), "b", base.Add(8*time.Second), ttl); err != nil {
		t.Fatal(err)
	}
	if lost, err := ns.MarkLostNodes(ctx(t), base.Add(9*time.Second), ttl); err != nil || len(lost) != 0 {
		t.Fatalf("within the ttl: lost %v, %v", lost, err)
	}
	now := base.Add(11 * time.Second)
	lost, err := ns.MarkLostNodes(ctx(t), now, ttl)
	if err != nil || len(lost) != 1 || lost[0].ID != "a" || lost[0].State != berth.NodeLost ||
		lost[0].Advertise != "http://a.test:8080" || !lost[0].LastHeartbeat.Equal(base) {
		t.Fatalf("past the ttl: lost %+v, %v; want a alone", lost, err)
	}
	if again, err := ns.MarkLostNodes(ctx(t), now.Add(time.Second), ttl); err != nil || len(again) != 0 {
		t.Fatalf("a second caller also got %v, %v", again, err)
	}
	_, by := nodesByID(t, ns)
	if by["a"].State != berth.NodeLost || by["b"].State != berth.NodeUp {
		t.Fatalf("states: a %s, b %s", by["a"].State, by["b"].State)
	}
	// a wakes up: its heartbeat says it is lost and renews nothing.
	wantCode(t, ns.Heartbeat(ctx(t), "a", now, ttl), berth.ENodeLost)
	if l, err := s.GetLease(ctx(t), "s1"); err != nil || !l.ExpiresAt.Equal(old1.ExpiresAt) {
		t.Fatalf("a lost node's heartbeat renewed its lease: %+v, %v", l, err)
	}
	// The taker finds the leases and takes s1 over.
	if got := leaseIDs(t, ns, "a"); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("leases of the lost node: %v", got)
	}
	l1 := acquire(t, s, "s1", "b", now, ttl)
	if l1.Token <= old1.Token {
		t.Fatalf("takeover token %d, was %d", l1.Token, old1.Token)
	}

	// a comes back as a new incarnation before s2 is taken over: its
	// heartbeats must not revive s2's lease.
	register(t, ns, "a", now)
	if err := ns.Heartbeat(ctx(t), "a", now.Add(time.Second), ttl); err != nil {
		t.Fatalf("heartbeat of the new incarnation: %v", err)
	}
	if l, err := s.GetLease(ctx(t), "s2"); err != nil || l.Owner != "a" || !l.ExpiresAt.Equal(old2.ExpiresAt) {
		t.Fatalf("the new incarnation renewed its old lease of s2: %+v, %v", l, err)
	}
	l2 := acquire(t, s, "s2", "b", now.Add(2*time.Second), ttl)
	if l2.Token <= old2.Token {
		t.Fatalf("takeover token %d, was %d", l2.Token, old2.Token)
	}
	// What the new incarnation takes is its own and its heartbeat renews it.
	create(t, s, newSession("s3", base))
	l3 := acquire(t, s, "s3", "a", now.Add(2*time.Second), ttl)
	if err := ns.Heartbeat(ctx(t), "a", now.Add(5*time.Second), ttl); err != nil {
		t.Fatal(err)
	}
	if l, err := s.GetLease(ctx(t), "s3"); err != nil || l.Token != l3.Token || !l.ExpiresAt.Equal(now.Add(5*time.Second+ttl)) {
		t.Fatalf("lease of the new incarnation: %+v, %v", l, err)
	}
	if got := leaseIDs(t, ns, "a"); !slices.Equal(got, []string{"s3"}) {
		t.Fatalf("leases of a: %v", got)
	}
}

// testNodeRestartKeepsLeases: a node that registers again while still up
// (a restart within the ttl) is the same incarnation: its heartbeat renews
// its leases and renewing one keeps the token.
func testNodeRestartKeepsLeases(t *testing.T, open Opener) {
	s := fresh(t, open)
	ns := nodeStore(t, s)
	ttl := 10 * time.Second
	register(t, ns, "a", base)
	create(t, s, newSession("s1", base))
	l := acquire(t, s, "s1", "a", base, ttl)
	register(t, ns, "a", base.Add(3*time.Second))
	if err := ns.Heartbeat(ctx(t), "a", base.Add(4*time.Second), ttl); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetLease(ctx(t), "s1")
	if err != nil || got.Token != l.Token || !got.ExpiresAt.Equal(base.Add(4*time.Second+ttl)) {
		t.Fatalf("lease after a restart and a heartbeat: %+v, %v", got, err)
	}
	if r := acquire(t, s, "s1", "a", base.Add(5*time.Second), ttl); r.Token != l.Token {
		t.Fatalf("reattach token %d, want %d", r.Token, l.Token)
	}
}

// testNodeLeave: a clean stop marks the node left and frees its leases; a
// lost node cannot leave (its leases are the taker's to handle).
func testNodeLeave(t *testing.T, open Opener) {
	s := fresh(t, open)
	ns := nodeStore(t, s)
	ttl := 10 * time.Second
	wantCode(t, ns.LeaveNode(ctx(t), "nobody"), berth.ENotFound)
	register(t, ns, "a", base)
	register(t, ns, "b", base)
	create(t, s, newSession("s1", base), newSession("s2", base))
	acquire(t, s, "s1", "a", base, ttl)
	lb := acquire(t, s, "s2", "b", base, ttl)

	if err := ns.LeaveNode(ctx(t), "a"); err != nil {
		t.Fatalf("leave: %v", err)
	}
	_, err := s.GetLease(ctx(t), "s1")
	wantCode(t, err, berth.ENotFound)
	if l, err := s.GetLease(ctx(t), "s2"); err != nil || l.Token != lb.Token {
		t.Fatalf("a's leave touched b's lease: %+v, %v", l, err)
	}
	_, by := nodesByID(t, ns)
	if by["a"].State != berth.NodeLeft || by["a"].Sessions != 0 {
		t.Fatalf("a after leaving: %+v", by["a"])
	}
	wantCode(t, ns.Heartbeat(ctx(t), "a", base.Add(time.Second), ttl), berth.ENodeLost)
	if err := ns.LeaveNode(ctx(t), "a"); err != nil {
		t.Fatalf("leave twice: %v", err)
	}
	// A left node is not lost: MarkLostNodes passes it by.
	lost, err := ns.MarkLostNodes(ctx(t), base.Add(time.Hour), ttl)
	if err != nil || len(lost) != 1 || lost[0].ID != "b" || lost[0].Sessions != 1 {
		t.Fatalf("lost %+v, %v; want b alone, with its one session", lost, err)
	}
	wantCode(t, ns.LeaveNode(ctx(t), "b"), berth.ENodeLost)
	if got := leaseIDs(t, ns, "b"); !slices.Equal(got, []string{"s2"}) {
		t.Fatalf("a lost node's leave freed its leases: %v", got)
	}
	// Coming back makes it up again.
	register(t, ns, "a", base.Add(2*time.Hour))
	if _, by := nodesByID(t, ns); by["a"].State != berth.NodeUp {
		t.Fatalf("a after registering again: %+v", by["a"])
	}
}

// testNodeMarkLostConcurrent: many nodes die at once and every survivor
// looks for them at the same moment: each lost node goes to exactly one.
func testNodeMarkLostConcurrent(t *testing.T, open Opener) {
	s := fresh(t, open)
	ns := nodeStore(t, s)
	const nodes, callers = 30, 8
	for i := range nodes {
		register(t, ns, fmt.Sprintf("n%02d", i), base.Add(time.Duration(i)*time.Millisecond))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range callers {
		wg.Go(func() {
			<-start
			// Several rounds each, so the calls overlap.
			for range 3 {
				lost, err := ns.MarkLostNodes(ctx(t), base.Add(time.Minute), 10*time.Second)
				if err != nil {
					t.Errorf("mark lost: %v", err)
					return
				}
				mu.Lock()
				for _, n := range lost {
					seen[n.ID]++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	onceEach(t, "node marked lost", seen, nodes)
}
