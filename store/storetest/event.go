package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func testAppendAndList(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	want := events("s1", 1, 10)
	appendOK(t, s, want[:4])
	appendOK(t, s, want[4:])
	sameEvents(t, list(t, s, "s1", 0), want)
	if n := lastSeq(t, s, "s1"); n != 10 {
		t.Fatalf("last seq %d, want 10", n)
	}
	if got := get(t, s, "s1").LastSeq; got != 10 {
		t.Fatalf("session LastSeq %d, want 10", got)
	}
	// A session that does not exist has no events.
	page, err := s.ListEvents(ctx(t), "nope", berth.EventFilter{})
	if err != nil || len(page) != 0 {
		t.Fatalf("events of a missing session: %v, %v", page, err)
	}
	// An empty batch is a no-op.
	appendOK(t, s, nil)
}

func testListEventsEdges(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	all := events("s1", 1, 250)
	appendOK(t, s, all)

	page := func(f berth.EventFilter) []berth.Event { t.Helper(); return listPage(t, s, "s1", f) }
	// Limit 0 means the default page.
	sameEvents(t, page(berth.EventFilter{}), all[:berth.DefaultEventLimit])
	sameEvents(t, page(berth.EventFilter{After: 0, Limit: 1}), all[:1])
	sameEvents(t, page(berth.EventFilter{After: 17, Limit: 1}), all[17:18])
	sameEvents(t, page(berth.EventFilter{After: 240, Limit: 50}), all[240:])
	sameEvents(t, page(berth.EventFilter{After: 249, Limit: 5}), all[249:])
	for _, after := range []int64{250, 251, 1 << 40} {
		if evs := page(berth.EventFilter{After: after, Limit: 10}); len(evs) != 0 {
			t.Fatalf("after %d: %d events, want none", after, len(evs))
		}
	}
	// Paging by the last seq of each page walks the whole log once.
	sameEvents(t, walk(t, s, "s1", berth.EventFilter{Limit: 7}), all)

	_, err := s.ListEvents(ctx(t), "s1", berth.EventFilter{After: -1})
	wantCode(t, err, berth.EInvalid)
	_, err = s.ListEvents(ctx(t), "s1", berth.EventFilter{Limit: -1})
	wantCode(t, err, berth.EInvalid)
}

func testListEventsClamp(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	const n = berth.MaxEventLimit + 234
	all := events("s1", 1, n)
	appendOK(t, s, all)
	evs, err := s.ListEvents(ctx(t), "s1", berth.EventFilter{Limit: 10 * berth.MaxEventLimit})
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, evs, all[:berth.MaxEventLimit])
	evs, err = s.ListEvents(ctx(t), "s1", berth.EventFilter{After: berth.MaxEventLimit, Limit: berth.MaxEventLimit + 1})
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, evs, all[berth.MaxEventLimit:])
}

func testListEventsFilters(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base), newSession("s2", base))
	all := events("s1", 1, 60)
	appendOK(t, s, all)
	appendOK(t, s, events("s2", 1, 60)) // same types and turns, other session

	pick := func(keep func(berth.Event) bool) []berth.Event { return keepEvents(all, keep) }
	listEventsFiltered(t, s, "s1", []eventCase{
		{berth.EventFilter{Type: berth.EventToolCall, Limit: 1000},
			pick(func(e berth.Event) bool { return e.Type == berth.EventToolCall })},
		{berth.EventFilter{TurnID: "turn-1", Limit: 1000},
			pick(func(e berth.Event) bool { return e.TurnID == "turn-1" })},
		{berth.EventFilter{Type: berth.EventUsage, TurnID: "turn-2", Limit: 1000},
			pick(func(e berth.Event) bool { return e.Type == berth.EventUsage && e.TurnID == "turn-2" })},
		{berth.EventFilter{Type: berth.EventToolCall, After: 30, Limit: 3},
			pick(func(e berth.Event) bool { return e.Type == berth.EventToolCall && e.Seq > 30 })[:3]},
		{berth.EventFilter{TurnID: "turn-3", After: 59, Limit: 10}, nil},
		{berth.EventFilter{Type: "no_such_type"}, nil},
	})
}

// eventCase is a filter and the events ListEvents must answer it with.
type eventCase struct {
	f    berth.EventFilter
	want []berth.Event
}

// listEventsFiltered lists the events of session id with each case's
// filter and compares them.
func listEventsFiltered(t *testing.T, s berth.Store, id string, cases []eventCase) {
	t.Helper()
	for _, c := range cases {
		sameEvents(t, listPage(t, s, id, c.f), c.want)
	}
}

// keepEvents returns the events of all that keep keeps, in order.
func keepEvents(all []berth.Event, keep func(berth.Event) bool) []berth.Event {
	var out []berth.Event
	for _, e := range all {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// A turn whose events arrive over several batches, interleaved with
// another turn's and with untagged events, is found whole by its filter,
// with and without a type, and paged within.
func testListEventsTurnAcrossBatches(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	turnOf := func(seq int64) string {
		switch {
		case seq%7 == 0:
			return ""
		case seq > 40 && seq < 50 && seq%2 == 0:
			return "other"
		}
		return "long"
	}
	var all []berth.Event
	for batch := int64(0); batch < 5; batch++ {
		evs := events("s1", batch*20+1, 20)
		for i := range evs {
			evs[i].TurnID = turnOf(evs[i].Seq)
			evs[i].Type = berth.EventAgentMessage
			if evs[i].Seq%10 == 3 {
				evs[i].Type = berth.EventToolCall
			}
		}
		appendOK(t, s, evs)
		all = append(all, evs...)
	}
	pick := func(keep func(berth.Event) bool) []berth.Event { return keepEvents(all, keep) }
	listEventsFiltered(t, s, "s1", []eventCase{
		{berth.EventFilter{TurnID: "long", Limit: 1000}, pick(func(e berth.Event) bool { return e.TurnID == "long" })},
		{berth.EventFilter{TurnID: "other", Limit: 1000}, pick(func(e berth.Event) bool { return e.TurnID == "other" })},
		{berth.EventFilter{TurnID: "long", Type: berth.EventAgentMessage, After: 50, Limit: 1000},
			pick(func(e berth.Event) bool { return e.TurnID == "long" && e.Type == berth.EventAgentMessage && e.Seq > 50 })},
		{berth.EventFilter{TurnID: "long", Type: berth.EventToolCall, Limit: 1000},
			pick(func(e berth.Event) bool { return e.TurnID == "long" && e.Type == berth.EventToolCall })},
		{berth.EventFilter{Type: berth.EventAgentMessage, After: 90, Limit: 1000},
			pick(func(e berth.Event) bool { return e.Type == berth.EventAgentMessage && e.Seq > 90 })},
		{berth.EventFilter{TurnID: "long", After: 10, Limit: 5},
			pick(func(e berth.Event) bool { return e.TurnID == "long" && e.Seq > 10 })[:5]},
		{berth.EventFilter{TurnID: "nope", Limit: 1000}, nil},
	})
}

func testAppendManySessions(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base), newSession("b", base), newSession("c", base))
	appendOK(t, s, events("c", 1, 2))
	// One batch, sessions interleaved.
	var batch []berth.Event
	a, b, c := events("a", 1, 5), events("b", 1, 3), events("c", 3, 4)
	for i := range 5 {
		batch = append(batch, a[i])
		if i < len(b) {
			batch = append(batch, b[i])
		}
		if i < len(c) {
			batch = append(batch, c[i])
		}
	}
	appendOK(t, s, batch)
	for id, want := range map[string]int64{"a": 5, "b": 3, "c": 6} {
		if n := lastSeq(t, s, id); n != want {
			t.Fatalf("last seq of %s = %d, want %d", id, n, want)
		}
		contiguous(t, list(t, s, id, 0), 1)
	}
	sameEvents(t, list(t, s, "a", 0), a)
}

func testLastSeqNeverMovesBack(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	appendOK(t, s, events("s1", 1, 5))
	appendOK(t, s, events("s1", 7, 1))
	// Filling the hole below the last seq must not move it back.
	appendOK(t, s, events("s1", 6, 1))
	if n := lastSeq(t, s, "s1"); n != 7 {
		t.Fatalf("last seq %d, want 7", n)
	}
	contiguous(t, list(t, s, "s1", 0), 1)
}

func testAppendInvalid(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	bad := events("s1", 1, 3)
	bad[1].Seq = 0
	wantCode(t, s.AppendEvents(ctx(t), bad), berth.EInvalid)
	bad = events("s1", 1, 3)
	bad[2].SessionID = ""
	wantCode(t, s.AppendEvents(ctx(t), bad), berth.EInvalid)
	if evs := list(t, s, "s1", 0); len(evs) != 0 {
		t.Fatalf("rejected batches wrote %d events", len(evs))
	}
}

func testAppendUnknownSession(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	batch := append(events("s1", 1, 3), events("ghost", 1, 2)...)
	wantCode(t, s.AppendEvents(ctx(t), batch), berth.ENotFound)
	if evs := list(t, s, "s1", 0); len(evs) != 0 || lastSeq(t, s, "s1") != 0 {
		t.Fatalf("a failed batch wrote %d events of another session", len(evs))
	}
	if evs := list(t, s, "ghost", 0); len(evs) != 0 {
		t.Fatalf("events of an unknown session were written")
	}
}

func testDuplicateSeq(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base), newSession("s2", base))
	first := events("s1", 1, 5)
	appendOK(t, s, first)

	// New events of another session, new ones of s1, then one seq s1
	// already has: nothing of the batch may land.
	batch := append(events("s2", 1, 3), events("s1", 6, 3)...)
	batch = append(batch, events("s1", 3, 1)...)
	wantCode(t, s.AppendEvents(ctx(t), batch), berth.EConflict)
	// The same seq twice inside one batch.
	dup := append(events("s2", 1, 2), events("s2", 2, 1)...)
	wantCode(t, s.AppendEvents(ctx(t), dup), berth.EConflict)
	// A big batch whose conflict comes last, after the first insert chunks.
	big := append(events("s2", 1, 700), events("s1", 5, 1)...)
	wantCode(t, s.AppendEvents(ctx(t), big), berth.EConflict)

	sameEvents(t, list(t, s, "s1", 0), first)
	if evs := list(t, s, "s2", 0); len(evs) != 0 {
		t.Fatalf("s2 has %d events after failed batches", len(evs))
	}
	if a, b := lastSeq(t, s, "s1"), lastSeq(t, s, "s2"); a != 5 || b != 0 {
		t.Fatalf("last seqs moved by failed batches: s1=%d s2=%d", a, b)
	}
	// The store still works after the failures.
	appendOK(t, s, events("s1", 6, 2))
	contiguous(t, list(t, s, "s1", 0), 1)
}

func testLargePayloadUnicode(t *testing.T, open Opener) {
	s := fresh(t, open)
	sess := newSession("séance-🚢", base)
	sess.Name = "日本語の名前 — ünïcödé ✓"
	sess.Labels = map[string]string{"projet": "élan", "emoji": "🚀"}
	sess.Env = map[string]string{"GREETING": "こんにちは"}
	create(t, s, sess)
	sameSession(t, get(t, s, sess.ID), sess)
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{Labels: map[string]string{"emoji": "🚀"}})
	if err != nil || ids(page) != sess.ID {
		t.Fatalf("unicode label filter: %q, %v", ids(page), err)
	}

	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 1<<20)})
	evs := []berth.Event{
		{Seq: 1, SessionID: sess.ID, TurnID: "tour-①", Type: berth.EventAgentMessage, Time: base,
			Data: json.RawMessage(`{"text":"Grüße 👋 \u0000 \"quoted\" \\ done","zh":"你好"}`)},
		{Seq: 2, SessionID: sess.ID, Type: berth.EventToolCall, Time: base.Add(time.Nanosecond), Data: big},
		// No data and no time: both must come back empty, not as "null".
		{Seq: 3, SessionID: sess.ID, Type: berth.EventUsage},
		{Seq: 4, SessionID: sess.ID, Type: berth.EventPlan, Time: time.Date(2200, 1, 2, 3, 4, 5, 999999999, time.UTC),
			Data: json.RawMessage(`[]`)},
	}
	appendOK(t, s, evs)
	got := list(t, s, sess.ID, 0)
	sameEvents(t, got, evs)
	if got[2].Data != nil || !got[2].Time.IsZero() {
		t.Fatalf("empty event came back with data %q and time %v", got[2].Data, got[2].Time)
	}
	if len(got[1].Data) != len(big) {
		t.Fatalf("large payload: %d bytes, want %d", len(got[1].Data), len(big))
	}
	filtered, err := s.ListEvents(ctx(t), sess.ID, berth.EventFilter{TurnID: "tour-①"})
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, filtered, evs[:1])
}

// testPageEndOfMillion pages the end of a 1,000,000-event log: the page
// after 999000 holds exactly the last 1,000 events.
func testPageEndOfMillion(t *testing.T, open Opener) {
	if testing.Short() {
		t.Skip("a million events: not in -short")
	}
	s := fresh(t, open)
	create(t, s, newSession("big", base))
	const total, batch = 1_000_000, 20_000
	bigCtx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	buf := make([]berth.Event, batch)
	for first := int64(1); first <= total; first += batch {
		for i := range buf {
			seq := first + int64(i)
			buf[i] = berth.Event{Seq: seq, SessionID: "big", TurnID: "turn", Type: berth.EventAgentMessage,
				Time: base, Data: json.RawMessage(`{"text":"x"}`)}
			if seq%1000 == 0 {
				buf[i].Type = berth.EventToolCall
			}
		}
		// The million rows and the reads after them get a bound of their
		// own: ctx(t) started with the test, and the appends are slow under -race.
		if err := s.AppendEvents(bigCtx, buf); err != nil {
			t.Fatalf("append from %d: %v", first, err)
		}
	}
	page, err := s.ListEvents(bigCtx, "big", berth.EventFilter{After: 999_000, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 1000 {
		t.Fatalf("page after 999000 has %d events", len(page))
	}
	contiguous(t, page, 999_001)
	if page[999].Type != berth.EventToolCall || page[0].Type != berth.EventAgentMessage {
		t.Fatalf("wrong events: first %s, last %s", page[0].Type, page[999].Type)
	}
	calls, err := s.ListEvents(bigCtx, "big", berth.EventFilter{After: 990_000, Limit: 1000, Type: berth.EventToolCall})
	if err != nil || len(calls) != 10 || calls[0].Seq != 991_000 || calls[9].Seq != total {
		t.Fatalf("tool calls after 990000: %d, %v", len(calls), err)
	}
	if n, err := s.LastSeq(bigCtx, "big"); err != nil || n != total {
		t.Fatalf("last seq %d, %v", n, err)
	}
}

// A page with MaxBytes ends at the event whose data reaches it, one event
// at least, with or without a type or turn filter; paging by the last
// seq still walks the whole log.
func testListEventsMaxBytes(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	all := make([]berth.Event, 12)
	for i := range all {
		seq := int64(i + 1)
		all[i] = berth.Event{Seq: seq, SessionID: "s1", TurnID: "t1", Type: berth.EventAgentMessage,
			Time: base.Add(time.Duration(seq) * time.Millisecond),
			Data: json.RawMessage(`{"text":"` + strings.Repeat("x", 90) + `"}`)} // 101 bytes
	}
	appendOK(t, s, all)
	page := func(f berth.EventFilter) []berth.Event { t.Helper(); return listPage(t, s, "s1", f) }
	sameEvents(t, page(berth.EventFilter{Limit: 10, MaxBytes: 250}), all[:3])
	sameEvents(t, page(berth.EventFilter{Limit: 10, MaxBytes: 202}), all[:2])
	sameEvents(t, page(berth.EventFilter{Limit: 10, MaxBytes: 1}), all[:1])
	sameEvents(t, page(berth.EventFilter{After: 5, Limit: 10, MaxBytes: 303, TurnID: "t1"}), all[5:8])
	sameEvents(t, page(berth.EventFilter{After: 5, Limit: 10, MaxBytes: 303, Type: berth.EventAgentMessage}), all[5:8])
	sameEvents(t, page(berth.EventFilter{Limit: 4, MaxBytes: 1 << 20}), all[:4])
	sameEvents(t, walk(t, s, "s1", berth.EventFilter{Limit: 100, MaxBytes: 300}), all)
}
