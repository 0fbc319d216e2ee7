package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// RunHookStoreTests runs the conformance suite of berth.HookStore (the
// hooks' outbox) against a backend whose stores implement it.
func RunHookStoreTests(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s hookStore)
	}{
		{"EnqueueDedupAndCursor", testHookEnqueue},
		{"ClaimHeadOnlyInOrder", testHookClaimOrder},
		{"ClaimDueAndExpiry", testHookClaimDue},
		{"ListByStateAndPages", testHookList},
		{"Prune", testHookPrune},
		{"InitAndResetCursors", testHookCursors},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fresh(t, open)
			hs, ok := s.(berth.HookStore)
			if !ok {
				t.Fatalf("%T does not implement berth.HookStore", s)
			}
			c.fn(t, hookStore{s, hs})
		})
	}
}

// hookStore is a store and its outbox.
type hookStore struct {
	berth.Store
	berth.HookStore
}

// delivery returns a pending delivery of event seq of session to hook.
func delivery(hook, session string, seq int64, at time.Time) *berth.HookDelivery {
	return &berth.HookDelivery{ID: fmt.Sprintf("dlv_%s_%s_%d", hook, session, seq), Hook: hook, Event: berth.EventTurnEnded,
		SessionID: session, Seq: seq, CreatedAt: at, Body: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
}

// claimIDs claims up to n deliveries of hook at now and returns their ids.
func claimIDs(t *testing.T, s hookStore, hook string, now time.Time, n int) []string {
	t.Helper()
	ds, err := s.ClaimHookDeliveries(ctx(t), hook, "node", now, now.Add(time.Minute), n)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.ID)
	}
	return ids
}

func testHookEnqueue(t *testing.T, s hookStore) {
	ds := []*berth.HookDelivery{delivery("a", "ses_1", 1, base), delivery("a", "ses_1", 2, base)}
	if err := s.EnqueueHookDeliveries(ctx(t), "ses_1", berth.HookCursor{Seq: 2, Badge: berth.BadgeRunning}, ds); err != nil {
		t.Fatal(err)
	}
	// The same event again (a rescan after a crash) is not a second delivery.
	again := delivery("a", "ses_1", 2, base)
	again.ID = "dlv_other"
	if err := s.EnqueueHookDeliveries(ctx(t), "ses_1", berth.HookCursor{Seq: 1}, []*berth.HookDelivery{again}); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListHookDeliveries(ctx(t), berth.HookDeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Deliveries) != 2 || page.Deliveries[0].ID != "dlv_a_ses_1_2" || string(page.Deliveries[0].Body) != `{"seq":2}` {
		t.Fatalf("deliveries = %+v", page.Deliveries)
	}
	if d := page.Deliveries[0]; d.State != berth.DeliveryPending || d.NextAttemptAt == nil || !d.CreatedAt.Equal(base) {
		t.Fatalf("delivery = %+v", d)
	}
	// The cursor never goes back, and an empty badge keeps the last one.
	c, ok, err := s.GetHookCursor(ctx(t), "ses_1")
	if err != nil || !ok || c.Seq != 2 || c.Badge != berth.BadgeRunning {
		t.Fatalf("cursor = %+v %v %v", c, ok, err)
	}
	if _, ok, _ := s.GetHookCursor(ctx(t), "ses_none"); ok {
		t.Fatal("a session without a cursor has one")
	}
	if err := s.EnqueueHookDeliveries(ctx(t), "ses_1", berth.HookCursor{}, []*berth.HookDelivery{{ID: "x"}}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("a delivery without a body: %v", err)
	}
}

func testHookClaimOrder(t *testing.T, s hookStore) {
	var ds []*berth.HookDelivery
	for seq := int64(1); seq <= 3; seq++ {
		ds = append(ds, delivery("a", "ses_1", seq, base), delivery("a", "ses_2", seq, base), delivery("b", "ses_1", seq, base))
	}
	if err := s.EnqueueHookDeliveries(ctx(t), "ses_1", berth.HookCursor{Seq: 3}, ds); err != nil {
		t.Fatal(err)
	}
	now := base.Add(time.Second)
	// One head per session of hook a; hook b is its own queue.
	if got := fmt.Sprint(claimIDs(t, s, "a", now, 10)); got != "[dlv_a_ses_1_1 dlv_a_ses_2_1]" {
		t.Fatalf("claimed %s", got)
	}
	if got := claimIDs(t, s, "a", now, 10); len(got) != 0 {
		t.Fatalf("claimed while the heads are in flight: %v", got)
	}
	if got := fmt.Sprint(claimIDs(t, s, "b", now, 10)); got != "[dlv_b_ses_1_1]" {
		t.Fatalf("hook b claimed %s", got)
	}
	// A failed attempt keeps the head pending: the next waits behind it.
	later := now.Add(time.Hour)
	retry := &berth.HookDelivery{ID: "dlv_a_ses_1_1", State: berth.DeliveryPending, Attempts: 1, LastError: "500", NextAttemptAt: &later}
	if err := s.FinishHookAttempt(ctx(t), retry); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s, "a", now, 10); len(got) != 0 {
		t.Fatalf("a session's next was claimed while its head waits for a retry: %v", got)
	}
	done := &berth.HookDelivery{ID: "dlv_a_ses_1_1", State: berth.DeliveryDelivered, Attempts: 2, DeliveredAt: &now}
	if err := s.FinishHookAttempt(ctx(t), done); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(claimIDs(t, s, "a", now, 10)); got != "[dlv_a_ses_1_2]" {
		t.Fatalf("after delivery claimed %s", got)
	}
	if err := s.FinishHookAttempt(ctx(t), &berth.HookDelivery{ID: "dlv_none", State: berth.DeliveryFailed}); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("finish of a missing delivery: %v", err)
	}
}

func testHookClaimDue(t *testing.T, s hookStore) {
	d := delivery("a", "ses_1", 1, base)
	if err := s.EnqueueHookDeliveries(ctx(t), "ses_1", berth.HookCursor{Seq: 1}, []*berth.HookDelivery{d}); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s, "a", base.Add(-time.Second), 1); len(got) != 0 {
		t.Fatalf("claimed before it was due: %v", got)
	}
	if got := claimIDs(t, s, "a", base, 1); len(got) != 1 {
		t.Fatalf("not claimed when due: %v", got)
	}
	// A claim that ran out (its node died) is claimed again.
	if got := claimIDs(t, s, "a", base.Add(2*time.Minute), 1); len(got) != 1 {
		t.Fatalf("not claimed after the claim expired: %v", got)
	}
	if err := s.ReleaseHookClaims(ctx(t), "node"); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s, "a", base.Add(2*time.Minute), 1); len(got) != 1 {
		t.Fatalf("not claimed after its claims were released: %v", got)
	}
}

func testHookList(t *testing.T, s hookStore) {
	var ds []*berth.HookDelivery
	for seq := int64(1); seq <= 5; seq++ {
		ds = append(ds, delivery("a", "ses_1", seq, base))
	}
	ds = append(ds, delivery("a", "ses_2", 1, base))
	if err := s.EnqueueHookDeliveries(ctx(t), "ses_1", berth.HookCursor{Seq: 5}, ds); err != nil {
		t.Fatal(err)
	}
	now := base.Add(time.Minute)
	for _, id := range []string{"dlv_a_ses_1_1", "dlv_a_ses_1_2"} {
		if err := s.FinishHookAttempt(ctx(t), &berth.HookDelivery{ID: id, State: berth.DeliveryDelivered, Attempts: 1, DeliveredAt: &now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishHookAttempt(ctx(t), &berth.HookDelivery{ID: "dlv_a_ses_1_3", State: berth.DeliveryFailed, Attempts: 9, LastError: "gone"}); err != nil {
		t.Fatal(err)
	}
	ids := func(f berth.HookDeliveryFilter) string {
		t.Helper()
		page, err := s.ListHookDeliveries(ctx(t), f)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, d := range page.Deliveries {
			out += d.ID[len("dlv_a_"):] + " "
		}
		return out + "|" + page.NextCursor
	}
	if got := ids(berth.HookDeliveryFilter{State: berth.DeliveryDelivered}); got != "ses_1_2 ses_1_1 |" {
		t.Fatalf("delivered = %s", got)
	}
	if got := ids(berth.HookDeliveryFilter{State: berth.DeliveryFailed}); got != "ses_1_3 |" {
		t.Fatalf("failed = %s", got)
	}
	if got := ids(berth.HookDeliveryFilter{State: berth.DeliveryPending, SessionID: "ses_1"}); got != "ses_1_5 ses_1_4 |" {
		t.Fatalf("pending of ses_1 = %s", got)
	}
	page, err := s.ListHookDeliveries(ctx(t), berth.HookDeliveryFilter{Limit: 4})
	if err != nil || len(page.Deliveries) != 4 || page.NextCursor == "" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	if got := ids(berth.HookDeliveryFilter{Limit: 4, Cursor: page.NextCursor}); got != "ses_1_2 ses_1_1 |" {
		t.Fatalf("second page = %s", got)
	}
	if d := page.Deliveries[0]; d.DeliveredAt != nil || d.NextAttemptAt == nil {
		t.Fatalf("pending delivery = %+v", d)
	}
	for _, f := range []berth.HookDeliveryFilter{{State: "lost"}, {Cursor: "x"}} {
		if _, err := s.ListHookDeliveries(ctx(t), f); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("%+v: %v", f, err)
		}
	}
}

func testHookPrune(t *testing.T, s hookStore) {
	var ds []*berth.HookDelivery
	for seq := int64(1); seq <= 6; seq++ {
		ds = append(ds, delivery("a", "ses_gone", seq, base))
	}
	if err := s.EnqueueHookDeliveries(ctx(t), "ses_gone", berth.HookCursor{Seq: 6}, ds); err != nil {
		t.Fatal(err)
	}
	old, recent := base.Add(time.Minute), base.Add(time.Hour)
	for seq, at := range map[int64]time.Time{1: old, 2: recent, 3: recent, 4: recent} {
		if err := s.FinishHookAttempt(ctx(t), &berth.HookDelivery{ID: fmt.Sprintf("dlv_a_ses_gone_%d", seq),
			State: berth.DeliveryDelivered, Attempts: 1, DeliveredAt: &at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishHookAttempt(ctx(t), &berth.HookDelivery{ID: "dlv_a_ses_gone_5", State: berth.DeliveryFailed}); err != nil {
		t.Fatal(err)
	}
	// Delivered before base+30m go (1), then all but the newest 2 (2);
	// the failed one is younger than its bound and stays, pending stays.
	n, err := s.PruneHookDeliveries(ctx(t), base.Add(30*time.Minute), 2, base.Add(-time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	page, err := s.ListHookDeliveries(ctx(t), berth.HookDeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, d := range page.Deliveries {
		got += fmt.Sprintf("%d:%s ", d.Seq, d.State)
	}
	if got != "6:pending 5:failed 4:delivered 3:delivered " {
		t.Fatalf("left %s", got)
	}
	if n, err := s.PruneHookDeliveries(ctx(t), base, 100, base.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("pruned failed %d, %v", n, err)
	}
	// The cursor of a session that does not exist goes too.
	if _, ok, _ := s.GetHookCursor(ctx(t), "ses_gone"); ok {
		t.Fatal("the cursor of a deleted session was kept")
	}
}

func testHookCursors(t *testing.T, s hookStore) {
	a := newSession("ses_a", base)
	create(t, s.Store, a)
	appendN(t, s.Store, "ses_a", 3)
	if err := s.InitHookCursors(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := s.GetHookCursor(ctx(t), "ses_a"); err != nil || !ok || c.Seq != 3 || c.Badge != berth.BadgeUnknown {
		t.Fatalf("cursor after init = %+v %v %v", c, ok, err)
	}
	// A second init (the next start) moves nothing: the session's new
	// events are still to be read.
	appendN(t, s.Store, "ses_a", 2)
	b := newSession("ses_b", base.Add(time.Second))
	create(t, s.Store, b)
	if err := s.InitHookCursors(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.GetHookCursor(ctx(t), "ses_a"); c.Seq != 3 {
		t.Fatalf("cursor moved by a second init: %+v", c)
	}
	if _, ok, _ := s.GetHookCursor(ctx(t), "ses_b"); ok {
		t.Fatal("a session created after init has a cursor")
	}
	if err := s.ResetHookCursors(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.GetHookCursor(ctx(t), "ses_a"); ok {
		t.Fatal("reset kept a cursor")
	}
	if err := s.InitHookCursors(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := s.GetHookCursor(ctx(t), "ses_a"); c.Seq != 5 {
		t.Fatalf("cursor after reset and init = %+v", c)
	}
}

// appendN appends n events to a session's log after its last seq.
func appendN(t *testing.T, s berth.Store, sessionID string, n int) {
	t.Helper()
	last, err := s.LastSeq(ctx(t), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	var evs []berth.Event
	for i := range n {
		e := berth.NewEvent(sessionID, "", berth.EventAgentMessage, map[string]string{"text": "x"})
		e.Seq = last + int64(i) + 1
		evs = append(evs, e)
	}
	if err := s.AppendEvents(ctx(t), evs); err != nil {
		t.Fatal(err)
	}
}
