package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// entry builds a pending input entry of a session.
func entry(sessionID, id, kind string, gen int64, at time.Time) *berth.QueueEntry {
	return &berth.QueueEntry{ID: id, SessionID: sessionID, Kind: kind, Text: "text of " + id + " — ünïcode ✓",
		Generation: gen, CreatedAt: at}
}

// enqueue stores an entry or fails the test, and returns its result.
func enqueue(t *testing.T, s berth.Store, e *berth.QueueEntry, max int) berth.EnqueueResult {
	t.Helper()
	r, err := s.EnqueuePrompt(ctx(t), e, max)
	if err != nil {
		t.Fatalf("enqueue %s: %v", e.ID, err)
	}
	return r
}

// queueIDs lists a session's pending entries as "id@position", space separated.
func queueIDs(t *testing.T, s berth.Store, sessionID string) string {
	t.Helper()
	q, err := s.ListQueue(ctx(t), sessionID)
	if err != nil {
		t.Fatalf("list queue of %s: %v", sessionID, err)
	}
	var out []string
	for _, e := range q {
		if e.State != berth.EntryPending {
			t.Fatalf("listed entry %s is %s", e.ID, e.State)
		}
		out = append(out, fmt.Sprintf("%s@%d", e.ID, e.Position))
	}
	return strings.Join(out, " ")
}

func testQueueFIFO(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base), newSession("b", base))
	for i, id := range []string{"q1", "q2", "q3"} {
		// Later entries may carry an earlier time: order is arrival, not clock.
		r := enqueue(t, s, entry("a", id, berth.EntryQueue, 1, base.Add(-time.Duration(i)*time.Second)), 10)
		if r.Position != i+1 || r.Replaced != "" {
			t.Fatalf("enqueue %s: %+v, want position %d", id, r, i+1)
		}
	}
	enqueue(t, s, entry("b", "other", berth.EntryQueue, 1, base), 10)
	if got := queueIDs(t, s, "a"); got != "q1@1 q2@2 q3@3" {
		t.Fatalf("queue of a: %q", got)
	}
	q, _ := s.ListQueue(ctx(t), "a")
	want := entry("a", "q1", berth.EntryQueue, 1, base)
	if g := q[0]; g.Text != want.Text || g.Kind != berth.EntryQueue || g.Generation != 1 || !g.CreatedAt.Equal(base) || g.SessionID != "a" {
		t.Fatalf("entry did not round-trip: %+v", g)
	}

	for i, id := range []string{"q1", "q2", "q3"} {
		turn := fmt.Sprintf("turn-%d", i)
		e, err := s.ClaimQueueEntry(ctx(t), "a", berth.EntryQueue, 1, turn)
		if err != nil || e.ID != id || e.State != berth.EntryDispatched || e.TurnID != turn || e.Text != "text of "+id+" — ünïcode ✓" {
			t.Fatalf("claim %d: %+v, %v; want %s", i, e, err, id)
		}
	}
	_, err := s.ClaimQueueEntry(ctx(t), "a", berth.EntryQueue, 1, "turn-x")
	wantCode(t, err, berth.ENotFound)
	if got := queueIDs(t, s, "b"); got != "other@1" {
		t.Fatalf("claiming a's entries touched b's: %q", got)
	}
	_, err = s.ListQueue(ctx(t), "nobody")
	wantCode(t, err, berth.ENotFound)
	_, err = s.EnqueuePrompt(ctx(t), entry("nobody", "q9", berth.EntryQueue, 1, base), 10)
	wantCode(t, err, berth.ENotFound)
	_, err = s.EnqueuePrompt(ctx(t), entry("a", "q1", berth.EntryQueue, 1, base), 10)
	wantCode(t, err, berth.EConflict)
}

func testQueueFull(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base))
	for i := range 3 {
		enqueue(t, s, entry("a", fmt.Sprintf("q%d", i), berth.EntryQueue, 0, base), 3)
	}
	_, err := s.EnqueuePrompt(ctx(t), entry("a", "q3", berth.EntryQueue, 0, base), 3)
	wantCode(t, err, berth.EQueueFull)
	if got := queueIDs(t, s, "a"); got != "q0@1 q1@2 q2@3" {
		t.Fatalf("a refused entry was stored: %q", got)
	}
	// A steer is not a queue entry: it does not count against the cap.
	enqueue(t, s, entry("a", "st", berth.EntrySteer, 0, base), 3)
	// Room comes back as entries leave pending.
	if _, err := s.CancelQueueEntry(ctx(t), "a", "q1"); err != nil {
		t.Fatal(err)
	}
	if r := enqueue(t, s, entry("a", "q3", berth.EntryQueue, 0, base), 3); r.Position != 3 {
		t.Fatalf("position after a cancel: %d", r.Position)
	}
	if got := queueIDs(t, s, "a"); got != "q0@1 q2@2 st@1 q3@3" {
		t.Fatalf("queue: %q", got)
	}
}

func testQueueCancel(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base))
	for i := range 4 {
		enqueue(t, s, entry("a", fmt.Sprintf("q%d", i), berth.EntryQueue, int64(i/2+1), base), 10)
	}
	e, err := s.CancelQueueEntry(ctx(t), "a", "q2")
	if err != nil || e.State != berth.EntryCanceled || e.ID != "q2" {
		t.Fatalf("cancel q2: %+v, %v", e, err)
	}
	_, err = s.CancelQueueEntry(ctx(t), "a", "q2")
	wantCode(t, err, berth.ENotFound)
	_, err = s.CancelQueueEntry(ctx(t), "a", "nope")
	wantCode(t, err, berth.ENotFound)
	// A claimed entry can no longer be canceled, nor claimed again.
	if _, err := s.ClaimQueueEntry(ctx(t), "a", berth.EntryQueue, 1, "t"); err != nil {
		t.Fatal(err)
	}
	_, err = s.CancelQueueEntry(ctx(t), "a", "q0")
	wantCode(t, err, berth.ENotFound)

	// Only entries of the given generation are claimed.
	_, err = s.ClaimQueueEntry(ctx(t), "a", berth.EntryQueue, 3, "t")
	wantCode(t, err, berth.ENotFound)

	// An interrupt at generation 2 cancels what is older than 2.
	gone, err := s.CancelQueue(ctx(t), "a", 2)
	if err != nil || len(gone) != 1 || gone[0].ID != "q1" || gone[0].State != berth.EntryCanceled {
		t.Fatalf("cancel older than 2: %+v, %v", gone, err)
	}
	if got := queueIDs(t, s, "a"); got != "q3@1" {
		t.Fatalf("queue after interrupt: %q", got)
	}
	gone, err = s.CancelQueue(ctx(t), "a", 0)
	if err != nil || len(gone) != 1 || gone[0].ID != "q3" {
		t.Fatalf("cancel all: %+v, %v", gone, err)
	}
	if gone, err := s.CancelQueue(ctx(t), "a", 0); err != nil || len(gone) != 0 {
		t.Fatalf("cancel of an empty queue: %+v, %v", gone, err)
	}
}

func testQueueSteerReplaces(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base))
	enqueue(t, s, entry("a", "q", berth.EntryQueue, 0, base), 10)
	if r := enqueue(t, s, entry("a", "s1", berth.EntrySteer, 0, base), 10); r.Replaced != "" || r.Position != 1 {
		t.Fatalf("first steer: %+v", r)
	}
	if r := enqueue(t, s, entry("a", "s2", berth.EntrySteer, 0, base), 10); r.Replaced != "s1" || r.Position != 1 {
		t.Fatalf("second steer: %+v", r)
	}
	if got := queueIDs(t, s, "a"); got != "q@1 s2@1" {
		t.Fatalf("queue: %q", got)
	}
	e, err := s.ClaimQueueEntry(ctx(t), "a", berth.EntrySteer, 0, "turn")
	if err != nil || e.ID != "s2" {
		t.Fatalf("claim steer: %+v, %v", e, err)
	}
	_, err = s.ClaimQueueEntry(ctx(t), "a", berth.EntrySteer, 0, "turn")
	wantCode(t, err, berth.ENotFound)
}

// testQueueClaimOnce races claimers: every entry is claimed exactly once.
func testQueueClaimOnce(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base))
	const n = 40
	for i := range n {
		enqueue(t, s, entry("a", fmt.Sprintf("q%02d", i), berth.EntryQueue, 0, base), n)
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, err := s.ClaimQueueEntry(ctx(t), "a", berth.EntryQueue, 0, fmt.Sprint("w", w))
				if berth.ErrorCode(err) == berth.ENotFound {
					return
				}
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				mu.Lock()
				claimed[e.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	onceEach(t, "entry claimed", claimed, n)
}

// permission builds a pending permission of a session.
func permission(sessionID, id string, at time.Time) *berth.Permission {
	return &berth.Permission{ID: id, SessionID: sessionID, TurnID: "turn-1",
		ToolCall: []byte(`{"toolCallId":"tc1","title":"rm -rf ✓","kind":"execute"}`),
		Options: []berth.PermissionOption{{ID: "allow", Name: "Allow", Kind: "allow_once"},
			{ID: "reject", Name: "Reject", Kind: "reject_once"}},
		State: berth.PermissionPending, CreatedAt: at}
}

func testPermissions(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base), newSession("b", base))
	for i, id := range []string{"p1", "p2", "p3"} {
		if err := s.CreatePermission(ctx(t), permission("a", id, base.Add(time.Duration(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreatePermission(ctx(t), permission("b", "pb", base)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.CreatePermission(ctx(t), permission("a", "p1", base)), berth.EConflict)
	wantCode(t, s.CreatePermission(ctx(t), permission("nobody", "px", base)), berth.ENotFound)

	got, err := s.GetPermission(ctx(t), "a", "p2")
	want := permission("a", "p2", base.Add(1))
	if err != nil || got.ID != "p2" || string(got.ToolCall) != string(want.ToolCall) || len(got.Options) != 2 ||
		got.Options[1] != want.Options[1] || got.State != berth.PermissionPending || !got.CreatedAt.Equal(want.CreatedAt) ||
		got.DecidedAt != nil || got.TurnID != "turn-1" {
		t.Fatalf("get p2: %+v, %v", got, err)
	}
	_, err = s.GetPermission(ctx(t), "b", "p2")
	wantCode(t, err, berth.ENotFound)

	at := base.Add(time.Minute)
	got.State, got.OptionID, got.DecidedBy, got.DecidedAt = berth.PermissionDecided, "allow", berth.DecidedByUser, &at
	if err := s.DecidePermission(ctx(t), got); err != nil {
		t.Fatal(err)
	}
	second := *got
	second.OptionID = "reject"
	wantCode(t, s.DecidePermission(ctx(t), &second), berth.EConflict)
	missing := permission("a", "nope", base)
	missing.State = berth.PermissionCanceled
	wantCode(t, s.DecidePermission(ctx(t), missing), berth.ENotFound)

	d, _ := s.GetPermission(ctx(t), "a", "p2")
	if d.State != berth.PermissionDecided || d.OptionID != "allow" || d.DecidedBy != berth.DecidedByUser || d.DecidedAt == nil || !d.DecidedAt.Equal(at) {
		t.Fatalf("decision did not stick: %+v", d)
	}

	names := func(ps []*berth.Permission) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return strings.Join(out, " ")
	}
	pending, err := s.ListPermissions(ctx(t), "a", berth.PermissionPending)
	if err != nil || names(pending) != "p1 p3" {
		t.Fatalf("pending of a: %q, %v", names(pending), err)
	}
	all, err := s.ListPermissions(ctx(t), "a", "")
	if err != nil || names(all) != "p1 p2 p3" {
		t.Fatalf("all of a: %q, %v", names(all), err)
	}
	_, err = s.ListPermissions(ctx(t), "nobody", "")
	wantCode(t, err, berth.ENotFound)
}

func testLeases(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base))
	_, err := s.GetLease(ctx(t), "a")
	wantCode(t, err, berth.ENotFound)
	_, err = s.AcquireLease(ctx(t), "nobody", "n1", base, time.Minute)
	wantCode(t, err, berth.ENotFound)

	l1, err := s.AcquireLease(ctx(t), "a", "n1", base, time.Minute)
	if err != nil || l1.Owner != "n1" || l1.Token < 1 || !l1.ExpiresAt.Equal(base.Add(time.Minute)) {
		t.Fatalf("first acquire: %+v, %v", l1, err)
	}
	// Another node cannot take a live lease.
	_, err = s.AcquireLease(ctx(t), "a", "n2", base.Add(30*time.Second), time.Minute)
	wantCode(t, err, berth.EConflict)
	// Renewing one's own keeps the token and moves the expiry.
	r, err := s.AcquireLease(ctx(t), "a", "n1", base.Add(30*time.Second), time.Minute)
	if err != nil || r.Token != l1.Token || !r.ExpiresAt.Equal(base.Add(90*time.Second)) {
		t.Fatalf("renew: %+v, %v", r, err)
	}
	// Once expired, another node takes it over with a larger token.
	l2, err := s.AcquireLease(ctx(t), "a", "n2", base.Add(2*time.Minute), time.Minute)
	if err != nil || l2.Owner != "n2" || l2.Token <= l1.Token {
		t.Fatalf("takeover: %+v, %v (old token %d)", l2, err, l1.Token)
	}
	// The old owner is fenced off.
	wantCode(t, s.ReleaseLease(ctx(t), "a", "n1", l1.Token), berth.EConflict)
	wantCode(t, s.ReleaseLease(ctx(t), "a", "n2", l1.Token), berth.EConflict)
	if got, err := s.GetLease(ctx(t), "a"); err != nil || got.SessionID != "a" || got.Owner != l2.Owner || got.Token != l2.Token || !got.ExpiresAt.Equal(l2.ExpiresAt) {
		t.Fatalf("get: %+v, %v; want %+v", got, err, l2)
	}
	if err := s.ReleaseLease(ctx(t), "a", "n2", l2.Token); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetLease(ctx(t), "a")
	wantCode(t, err, berth.ENotFound)
	wantCode(t, s.ReleaseLease(ctx(t), "a", "n2", l2.Token), berth.ENotFound)
	// Tokens never go back, even after a release.
	l3, err := s.AcquireLease(ctx(t), "a", "n1", base.Add(3*time.Minute), time.Minute)
	if err != nil || l3.Token <= l2.Token {
		t.Fatalf("acquire after release: %+v, %v (previous token %d)", l3, err, l2.Token)
	}
}

// testSideEntitiesCascade: deleting a session deletes its queue,
// permissions and lease, and they survive a reopen until then.
func testSideEntitiesCascade(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	create(t, s, newSession("a", base), newSession("b", base))
	for _, id := range []string{"a", "b"} {
		enqueue(t, s, entry(id, "q-"+id, berth.EntryQueue, 0, base), 10)
		if err := s.CreatePermission(ctx(t), permission(id, "p-"+id, base)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireLease(ctx(t), id, "n1", base, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	t.Cleanup(func() { s.Close() })
	if got := queueIDs(t, s, "a"); got != "q-a@1" {
		t.Fatalf("queue after reopen: %q", got)
	}
	if err := s.DeleteSession(ctx(t), "a"); err != nil {
		t.Fatal(err)
	}
	create(t, s, newSession("a", base))
	if got := queueIDs(t, s, "a"); got != "" {
		t.Fatalf("queue survived the delete: %q", got)
	}
	if ps, err := s.ListPermissions(ctx(t), "a", ""); err != nil || len(ps) != 0 {
		t.Fatalf("permissions survived the delete: %d, %v", len(ps), err)
	}
	_, err := s.GetLease(ctx(t), "a")
	wantCode(t, err, berth.ENotFound)
	if got := queueIDs(t, s, "b"); got != "q-b@1" {
		t.Fatalf("b's queue: %q", got)
	}
	if _, err := s.GetPermission(ctx(t), "b", "p-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLease(ctx(t), "b"); err != nil {
		t.Fatal(err)
	}
}

// testQueueContent: a prompt sent as content blocks keeps them through
// enqueue, list, claim and a booting daemon's recovery read.
func testQueueContent(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base))
	blocks := []berth.ContentBlock{{Type: berth.ContentText, Text: "look ✓"},
		{Type: berth.ContentImage, MimeType: "image/png", Data: "iVBORw0KGgo=", Bytes: 8},
		{Type: berth.ContentResource, URI: "file:///w/a.txt", Text: "hello", Path: "a.txt", Bytes: 5}}
	e := entry("a", "c1", berth.EntryQueue, 1, base)
	e.Content = blocks
	enqueue(t, s, e, 10)
	enqueue(t, s, entry("a", "c2", berth.EntryQueue, 1, base), 10)
	want := fmt.Sprint(blocks)
	q, err := s.ListQueue(ctx(t), "a")
	if err != nil || len(q) != 2 {
		t.Fatalf("list: %v %v", q, err)
	}
	if fmt.Sprint(q[0].Content) != want || q[1].Content != nil {
		t.Fatalf("listed content %v and %v, want %s and none", q[0].Content, q[1].Content, want)
	}
	rec, err := s.ListRecovery(ctx(t), []string{"a"})
	if err != nil || rec["a"] == nil || len(rec["a"].Queue) != 2 {
		t.Fatalf("recovery: %v %v", rec, err)
	}
	if got := fmt.Sprint(rec["a"].Queue[0].Content); got != want {
		t.Fatalf("recovered content %s, want %s", got, want)
	}
	c, err := s.ClaimQueueEntry(ctx(t), "a", berth.EntryQueue, 1, "turn_1")
	if err != nil || c.ID != "c1" || fmt.Sprint(c.Content) != want {
		t.Fatalf("claimed %+v, %v; want c1 with its content", c, err)
	}
}
