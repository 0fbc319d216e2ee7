package codec

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/berth-sh/berth"
)

func TestCursorRoundTrip(t *testing.T) {
	at, id, err := DecodeCursor(EncodeCursor(-42, "ses_a:b"))
	if err != nil || at != -42 || id != "ses_a:b" {
		t.Fatalf("round trip = %d %q %v", at, id, err)
	}
	for _, bad := range []string{"", "!!", EncodeCursor(1, "")[:2], "eA"} {
		if _, _, err := DecodeCursor(bad); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("DecodeCursor(%q) = %v, want invalid_argument", bad, err)
		}
	}
}

func TestSessionDocHiddenFields(t *testing.T) {
	in := &berth.Session{ID: "s", AgentPID: 7, NeedsAuth: true, Env: map[string]string{"K": "v"},
		ShimSocket: "/run/berth/s.sock", ShimPID: 99, LastSeq: 5, AgentOffset: 999}
	doc, err := EncodeSession(in)
	if err != nil {
		t.Fatal(err)
	}
	// The counters come from the columns, never from the document.
	out, err := DecodeSession([]byte(doc), 3, 42)
	if err != nil {
		t.Fatal(err)
	}
	if out.LastSeq != 3 || out.AgentOffset != 42 {
		t.Fatalf("last seq %d, agent offset %d: want 3, 42 from the columns", out.LastSeq, out.AgentOffset)
	}
	if out.ShimSocket != in.ShimSocket || out.ShimPID != in.ShimPID || out.AgentPID != in.AgentPID ||
		!out.NeedsAuth || out.Env["K"] != "v" {
		t.Fatalf("hidden fields lost: %+v from %s", out, doc)
	}
}

func TestPlanPage(t *testing.T) {
	bounds := func(turn string) (int64, int64, bool, error) { return 10, 20, turn == "t1", nil }
	for _, c := range []struct {
		f                berth.EventFilter
		kind             PageKind
		after, upper     int64
		limit            int
		empty, wantError bool
	}{
		{f: berth.EventFilter{}, kind: PageAll, limit: berth.DefaultEventLimit},
		{f: berth.EventFilter{Limit: 5000}, kind: PageAll, limit: berth.MaxEventLimit},
		{f: berth.EventFilter{Type: berth.EventAgentMessage, After: 3}, kind: PageByChunkType, after: 3, limit: 100},
		{f: berth.EventFilter{Type: berth.EventTurnEnded}, kind: PageByType, limit: 100},
		{f: berth.EventFilter{TurnID: "t1"}, kind: PageByTurn, after: 9, upper: 20, limit: 100},
		{f: berth.EventFilter{TurnID: "t1", After: 15}, kind: PageByTurn, after: 15, upper: 20, limit: 100},
		{f: berth.EventFilter{TurnID: "t1", Type: berth.EventToolCall}, kind: PageByTypeInTurn, after: 9, upper: 20, limit: 100},
		{f: berth.EventFilter{TurnID: "t1", Type: berth.EventAgentThought}, kind: PageByTurn, after: 9, upper: 20, limit: 100},
		{f: berth.EventFilter{TurnID: "nope"}, empty: true},
		{f: berth.EventFilter{After: -1}, wantError: true},
		{f: berth.EventFilter{Limit: -1}, wantError: true},
	} {
		p, empty, err := PlanPage(c.f, bounds)
		if c.wantError {
			if !berth.IsCode(err, berth.EInvalid) {
				t.Errorf("%+v: err %v, want invalid_argument", c.f, err)
			}
			continue
		}
		if err != nil || empty != c.empty {
			t.Errorf("%+v: empty %v err %v", c.f, empty, err)
			continue
		}
		if !empty && (p.Kind != c.kind || p.After != c.after || p.Upper != c.upper || p.Limit != c.limit) {
			t.Errorf("%+v: plan %+v", c.f, p)
		}
	}
}

func TestLoadMigrationsRefusesBadNames(t *testing.T) {
	good := fstest.MapFS{"m/0002_b.sql": {Data: []byte("B")}, "m/0001_a.sql": {Data: []byte("A")}}
	ms, err := LoadMigrations(good, "m")
	if err != nil || len(ms) != 2 || ms[0].Version != 1 || ms[1].SQL != "B" {
		t.Fatalf("migrations = %+v, %v", ms, err)
	}
	for _, bad := range []fstest.MapFS{
		{"m/first.sql": {}},
		{"m/0001_a.sql": {}, "m/1_b.sql": {}},
		{"m/0001_a.txt": {}},
	} {
		if _, err := LoadMigrations(bad, "m"); err == nil {
			t.Errorf("LoadMigrations(%v) accepted", bad)
		}
	}
}

// A long page is decoded on every core, in order; a bad document in it
// fails the page whole.
func TestDecodeSessionsInOrder(t *testing.T) {
	for _, n := range []int{0, 1, decodeChunk - 1, 5*decodeChunk + 3} {
		rows := make([]RawSession, n)
		for i := range rows {
			doc, err := EncodeSession(&berth.Session{ID: fmt.Sprintf("ses_%04d", i), State: berth.StateActive})
			if err != nil {
				t.Fatal(err)
			}
			rows[i] = RawSession{Doc: []byte(doc), LastSeq: int64(i), Usage: UsageRow{Own: berth.Usage{ModelCalls: int64(i)}}}
		}
		got, err := DecodeSessions(rows)
		if err != nil || len(got) != n || got == nil {
			t.Fatalf("%d rows: %d sessions, %v", n, len(got), err)
		}
		for i, s := range got {
			if s.ID != fmt.Sprintf("ses_%04d", i) || s.LastSeq != int64(i) || s.Usage.ModelCalls != int64(i) {
				t.Fatalf("%d rows: session %d is %s (seq %d, calls %d)", n, i, s.ID, s.LastSeq, s.Usage.ModelCalls)
			}
		}
		if n > 2 {
			rows[n-2].Doc = []byte("{not json")
			if _, err := DecodeSessions(rows); !berth.IsCode(err, berth.EInternal) {
				t.Errorf("%d rows, one bad: %v", n, err)
			}
		}
	}
}
