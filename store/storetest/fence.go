package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// twoNodes opens the store of one directory twice, as two nodes sharing
// it, fenced as nodes A and B; it skips the test when the backend is not
// a berth.Fencer.
func twoNodes(t *testing.T, open Opener) (a, b berth.Store) {
	t.Helper()
	dir := t.TempDir()
	a = open(t, dir)
	t.Cleanup(func() { a.Close() })
	if _, ok := a.(berth.Fencer); !ok {
		t.Skipf("%s is not fenced", a.Name())
	}
	b = open(t, dir)
	t.Cleanup(func() { b.Close() })
	a.(berth.Fencer).Fence("A")
	b.(berth.Fencer).Fence("B")
	return a, b
}

// wantLeaseLost fails the test unless err is ELeaseLost naming sessions.
func wantLeaseLost(t *testing.T, err error, sessions ...string) {
	t.Helper()
	wantCode(t, err, berth.ELeaseLost)
	d := berth.ErrorDetails(err)
	if got := fmt.Sprint(d["sessions"]); got != fmt.Sprint(sessions) {
		t.Fatalf("ELeaseLost names sessions %s, want %v (error %v)", got, sessions, err)
	}
}

// sessionWrites tries, on s, every fenced write of session id, each one
// that would succeed if the lease were held, on what seed(n) made, and
// returns each one's error by name.
func sessionWrites(t *testing.T, s berth.Store, id string, n int) map[string]error {
	t.Helper()
	c := ctx(t)
	out := map[string]error{}
	sess := get(t, s, id)
	sess.Name = fmt.Sprintf("renamed %d", n)
	out["UpdateSession"] = s.UpdateSession(c, sess, "")
	out["AppendEvents"] = s.AppendEvents(c, events(id, lastSeq(t, s, id)+1, 2))
	_, out["EnqueuePrompt"] = s.EnqueuePrompt(c, entry(id, fmt.Sprintf("%s-q%d", id, n), berth.EntryQueue, 0, base), 100)
	_, out["CancelQueueEntry"] = s.CancelQueueEntry(c, id, fmt.Sprintf("%s-keep%d", id, n))
	_, out["ClaimQueueEntry"] = s.ClaimQueueEntry(c, id, berth.EntryQueue, 0, "turn")
	_, out["CancelQueue"] = s.CancelQueue(c, id, 0)
	out["CreatePermission"] = s.CreatePermission(c, permission(id, fmt.Sprintf("%s-p%d", id, n), base))
	p := permission(id, fmt.Sprintf("%s-perm%d", id, n), base)
	at := base.Add(time.Minute)
	p.State, p.OptionID, p.DecidedBy, p.DecidedAt = berth.PermissionDecided, "allow", berth.DecidedByUser, &at
	out["DecidePermission"] = s.DecidePermission(c, p)
	out["CreateElicitation"] = s.CreateElicitation(c, elicitation(id, fmt.Sprintf("%s-e%d", id, n), base))
	e := elicitation(id, fmt.Sprintf("%s-elic%d", id, n), base)
	e.State, e.Action, e.DecidedBy, e.ResolvedAt = berth.ElicitationDeclined, berth.ElicitationDecline, berth.DecidedByUser, &at
	out["ResolveElicitation"] = s.ResolveElicitation(c, e)
	return out
}

// snapshot is everything a fenced write could change of a session, as
// JSON, to tell that nothing was written.
func snapshot(t *testing.T, s berth.Store, id string) string {
	t.Helper()
	c := ctx(t)
	sess := get(t, s, id)
	q, err := s.ListQueue(c, id)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := s.ListPermissions(c, id, "")
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.ListElicitations(c, id, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal([]any{normalise(sess), sess.LastSeq, list(t, s, id, 0), q, ps, es})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seed gives a session what sessionWrites(n) works on: a pending entry,
// permission and elicitation to cancel, decide and resolve.
func seed(t *testing.T, s berth.Store, id string, n int) {
	t.Helper()
	enqueue(t, s, entry(id, fmt.Sprintf("%s-keep%d", id, n), berth.EntryQueue, 0, base), 100)
	if err := s.CreatePermission(ctx(t), permission(id, fmt.Sprintf("%s-perm%d", id, n), base)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateElicitation(ctx(t), elicitation(id, fmt.Sprintf("%s-elic%d", id, n), base)); err != nil {
		t.Fatal(err)
	}
}

// testFenceTakeover: node A holds a session; node B takes over the lease
// once it expired; from then on every write of A to that session fails
// with ELeaseLost and changes nothing, while B writes; after B releases
// it, A acquires it again with a new token and writes again.
func testFenceTakeover(t *testing.T, open Opener) {
	a, b := twoNodes(t, open)
	ttl := 10 * time.Second
	create(t, a, newSession("s", base), newSession("t", base))
	la := acquire(t, a, "s", "A", base, ttl)
	acquire(t, a, "t", "A", base, ttl)
	seed(t, a, "s", 1)

	// B does not hold s: nothing it writes to s goes in.
	before := snapshot(t, a, "s")
	for name, err := range sessionWrites(t, b, "s", 1) {
		if berth.ErrorCode(err) != berth.ELeaseLost {
			t.Errorf("%s by B while A holds the lease: %v, want %s", name, err, berth.ELeaseLost)
		}
	}
	if got := snapshot(t, a, "s"); got != before {
		t.Fatalf("B's refused writes changed s:\n before %s\n after  %s", before, got)
	}
	// A holds it: every write goes in.
	seed(t, a, "s", 2)
	for name, err := range sessionWrites(t, a, "s", 2) {
		if err != nil {
			t.Errorf("%s by the holder: %v", name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	seed(t, a, "s", 3)

	// A stalls past the ttl and B takes the session over.
	lb := acquire(t, b, "s", "B", base.Add(ttl+time.Second), ttl)
	if lb.Token <= la.Token {
		t.Fatalf("takeover token %d, was %d", lb.Token, la.Token)
	}
	before = snapshot(t, a, "s")
	for name, err := range sessionWrites(t, a, "s", 3) {
		if berth.ErrorCode(err) != berth.ELeaseLost {
			t.Errorf("%s by A after the takeover: %v, want %s", name, err, berth.ELeaseLost)
		}
	}
	if got := snapshot(t, a, "s"); got != before {
		t.Fatalf("A's refused writes changed s:\n before %s\n after  %s", before, got)
	}
	wantLeaseLost(t, a.AppendEvents(ctx(t), events("s", lastSeq(t, a, "s")+1, 1)), "s")

	// A batch of A's that holds s and t fails whole, naming s alone.
	tBefore := lastSeq(t, a, "t")
	batch := append(events("t", tBefore+1, 3), events("s", lastSeq(t, a, "s")+1, 2)...)
	wantLeaseLost(t, a.AppendEvents(ctx(t), batch), "s")
	if got := lastSeq(t, a, "t"); got != tBefore {
		t.Fatalf("a refused batch wrote t's events: last seq %d, was %d", got, tBefore)
	}
	// Without s, t's events go in.
	appendOK(t, a, events("t", tBefore+1, 3))

	// B, the holder, writes.
	seed(t, b, "s", 4)
	for name, err := range sessionWrites(t, b, "s", 4) {
		if err != nil {
			t.Errorf("%s by the new holder: %v", name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// B gives it up; A takes it again, with a new token, and writes.
	if err := b.ReleaseLease(ctx(t), "s", "B", lb.Token); err != nil {
		t.Fatal(err)
	}
	wantLeaseLost(t, b.AppendEvents(ctx(t), events("s", lastSeq(t, b, "s")+1, 1)), "s")
	la2 := acquire(t, a, "s", "A", base.Add(2*ttl), ttl)
	if la2.Token <= lb.Token {
		t.Fatalf("token after the release %d, B's was %d", la2.Token, lb.Token)
	}
	appendOK(t, a, events("s", lastSeq(t, a, "s")+1, 2))

	// Releasing it fences A out again.
	if err := a.ReleaseLease(ctx(t), "s", "A", la2.Token); err != nil {
		t.Fatal(err)
	}
	wantLeaseLost(t, a.AppendEvents(ctx(t), events("s", lastSeq(t, a, "s")+1, 1)), "s")
}

// testFenceMissingSession: a fenced write of a session that does not
// exist is ENotFound, as unfenced.
func testFenceMissingSession(t *testing.T, open Opener) {
	a, _ := twoNodes(t, open)
	wantCode(t, a.AppendEvents(ctx(t), events("nobody", 1, 1)), berth.ENotFound)
	wantCode(t, a.UpdateSession(ctx(t), newSession("nobody", base), ""), berth.ENotFound)
	_, err := a.EnqueuePrompt(ctx(t), entry("nobody", "q", berth.EntryQueue, 0, base), 10)
	wantCode(t, err, berth.ENotFound)
	wantCode(t, a.CreatePermission(ctx(t), permission("nobody", "p", base)), berth.ENotFound)
	wantCode(t, a.CreateElicitation(ctx(t), elicitation("nobody", "e", base)), berth.ENotFound)
	// A new session is created unfenced; the creator takes its lease next.
	create(t, a, newSession("new", base))
	wantLeaseLost(t, a.AppendEvents(ctx(t), events("new", 1, 1)), "new")
	acquire(t, a, "new", "A", base, time.Minute)
	appendOK(t, a, events("new", 1, 1))
}

// testFenceNodeLost: a node whose heartbeat says it is lost writes
// nothing more, even to a session whose lease nobody took yet, until it
// registers again and acquires the lease anew.
func testFenceNodeLost(t *testing.T, open Opener) {
	a, b := twoNodes(t, open)
	na, ok := a.(berth.NodeStore)
	if !ok {
		t.Skipf("%s has no node registry", a.Name())
	}
	nb := b.(berth.NodeStore)
	ttl := 10 * time.Second
	register(t, na, "A", base)
	register(t, nb, "B", base)
	create(t, a, newSession("s", base))
	acquire(t, a, "s", "A", base, ttl)
	appendOK(t, a, events("s", 1, 1))
	if err := nb.Heartbeat(ctx(t), "B", base.Add(ttl), ttl); err != nil {
		t.Fatal(err)
	}
	lost, err := nb.MarkLostNodes(ctx(t), base.Add(ttl+time.Second), ttl)
	if err != nil || len(lost) != 1 || lost[0].ID != "A" {
		t.Fatalf("mark lost: %v, %v", lost, err)
	}
	// The lease still names A with its token, but A has learnt it is lost.
	wantCode(t, na.Heartbeat(ctx(t), "A", base.Add(ttl+2*time.Second), ttl), berth.ENodeLost)
	wantLeaseLost(t, a.AppendEvents(ctx(t), events("s", 2, 1)), "s")
	if n := lastSeq(t, a, "s"); n != 1 {
		t.Fatalf("last seq %d after the lost node's append", n)
	}
	// Back as a new incarnation, it takes the session again (nobody took
	// it over) with a new token, and writes.
	old, err := a.GetLease(ctx(t), "s")
	if err != nil {
		t.Fatal(err)
	}
	register(t, na, "A", base.Add(ttl+3*time.Second))
	l := acquire(t, a, "s", "A", base.Add(ttl+3*time.Second), ttl)
	if l.Token <= old.Token {
		t.Fatalf("the new incarnation's token %d, the old one's %d", l.Token, old.Token)
	}
	appendOK(t, a, events("s", 2, 1))
}

// testFenceRace: node A appends to a session as fast as it can while node
// B takes it over. Every append of A either commits before the takeover
// (B reads it) or fails: after B's acquire returns and B reads the last
// seq, B's own next seq goes in, and A never commits again.
func testFenceRace(t *testing.T, open Opener) {
	a, b := twoNodes(t, open)
	ttl := 10 * time.Second
	for round := range 5 {
		id := fmt.Sprintf("race-%d", round)
		create(t, a, newSession(id, base))
		acquire(t, a, id, "A", base, ttl)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var committed []int64
		stop := make(chan struct{})
		wg.Go(func() {
			for seq := int64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := a.AppendEvents(ctx(t), events(id, seq, 1)); err != nil {
					if berth.ErrorCode(err) != berth.ELeaseLost {
						t.Errorf("A's append %d: %v", seq, err)
					}
					return
				}
				mu.Lock()
				committed = append(committed, seq)
				mu.Unlock()
			}
		})
		// Let A commit some first.
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			n := len(committed)
			mu.Unlock()
			if n >= 3 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		acquire(t, b, id, "B", base.Add(ttl+time.Second), ttl)
		last := lastSeq(t, b, id)
		err := b.AppendEvents(ctx(t), events(id, last+1, 1))
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: B's first append after the takeover (seq %d): %v", round, last+1, err)
		}
		mu.Lock()
		if n := len(committed); n == 0 || committed[n-1] > last {
			t.Fatalf("round %d: A committed up to %v after B read last seq %d", round, committed[max(0, n-3):], last)
		}
		mu.Unlock()
		got := list(t, b, id, 0)
		contiguous(t, got, 1)
		if !slices.Equal(seqs(got)[:len(got)-1], committed) {
			t.Fatalf("round %d: log %v, A committed %v", round, seqs(got), committed)
		}
	}
}

// testFenceConcurrentWriters: the holder's event writer, its session
// updates, queue and permission writes and its heartbeats all run at once
// on one session, as in a daemon: none of them fails (a deadlock between
// the fence's lease lock and the writes' session locks would).
func testFenceConcurrentWriters(t *testing.T, open Opener) {
	a, _ := twoNodes(t, open)
	ns, ok := a.(berth.NodeStore)
	if !ok {
		t.Skipf("%s has no node registry", a.Name())
	}
	ttl := time.Hour
	register(t, ns, "A", base)
	const sessions = 3
	for i := range sessions {
		id := fmt.Sprintf("w%d", i)
		create(t, a, newSession(id, base))
		acquire(t, a, id, "A", base, ttl)
	}
	const rounds = 150
	var wg sync.WaitGroup
	// The event writer: batches over every session.
	wg.Go(func() {
		for seq := int64(1); seq <= rounds; seq++ {
			var batch []berth.Event
			for i := range sessions {
				batch = append(batch, events(fmt.Sprintf("w%d", i), seq, 1)...)
			}
			if err := a.AppendEvents(ctx(t), batch); err != nil {
				t.Errorf("append %d: %v", seq, err)
				return
			}
		}
	})
	for i := range sessions {
		id := fmt.Sprintf("w%d", i)
		wg.Go(func() {
			sess := newSession(id, base)
			for n := range rounds {
				sess.Name = fmt.Sprintf("n%d", n)
				if err := a.UpdateSession(ctx(t), sess, ""); err != nil {
					t.Errorf("update %s: %v", id, err)
					return
				}
				if _, err := a.EnqueuePrompt(ctx(t), entry(id, fmt.Sprintf("%s-%d", id, n), berth.EntrySteer, 0, base), 10); err != nil {
					t.Errorf("enqueue %s: %v", id, err)
					return
				}
				if err := a.CreatePermission(ctx(t), permission(id, fmt.Sprintf("%s-p%d", id, n), base)); err != nil {
					t.Errorf("permission %s: %v", id, err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var hb sync.WaitGroup
	hb.Go(func() {
		for k := 1; ; k++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := ns.Heartbeat(ctx(t), "A", base.Add(time.Duration(k)*time.Millisecond), ttl); err != nil {
				t.Errorf("heartbeat: %v", err)
				return
			}
		}
	})
	wg.Wait()
	close(stop)
	hb.Wait()
	for i := range sessions {
		if n := lastSeq(t, a, fmt.Sprintf("w%d", i)); n != rounds {
			t.Fatalf("w%d: last seq %d, want %d", i, n, rounds)
		}
	}
}
