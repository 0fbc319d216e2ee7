package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// turnEvents builds a session's log from seq 1 on: each step is a type and
// a turn, with agent_message chunks between them (the type the partial
// index leaves out).
func turnEvents(sessionID string, steps ...[2]string) []berth.Event {
	var out []berth.Event
	seq := int64(0)
	add := func(typ, turn string) {
		seq++
		out = append(out, berth.Event{Seq: seq, SessionID: sessionID, TurnID: turn, Type: typ,
			Time: base.Add(time.Duration(seq) * time.Millisecond), Data: json.RawMessage(fmt.Sprintf(`{"text":"%s %d"}`, typ, seq))})
	}
	for _, st := range steps {
		add(st[0], st[1])
		add(berth.EventAgentMessage, st[1])
	}
	return out
}

// testListRecovery checks that one ListRecovery call gives, for each
// session, what ListQueue, ListPermissions(pending),
// ListElicitations(pending) and a walk of its turn_started and turn_ended
// events give one session at a time.
func testListRecovery(t *testing.T, open Opener) {
	s := fresh(t, open)
	ids := []string{"idle", "open", "closed", "later-end", "reopened", "steered"}
	for i, id := range ids {
		create(t, s, newSession(id, base.Add(time.Duration(i))))
	}
	seedRecovery(t, s)

	got, err := s.ListRecovery(ctx(t), append([]string{"missing"}, ids...))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["missing"]; ok || len(got) != len(ids) {
		t.Fatalf("ListRecovery answered for %d sessions (missing: %v), want %d", len(got), got["missing"], len(ids))
	}
	wantOpen := map[string]int64{"open": 5, "later-end": 3, "reopened": 5}
	for _, id := range ids {
		r := got[id]
		if r == nil {
			t.Fatalf("no recovery of %s", id)
		}
		checkRecovery(t, s, id, r)
		checkOpenTurn(t, s, id, r, wantOpen)
		stored, err := s.GetSession(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Session, stored) {
			t.Errorf("%s: recovery's session %s, want %s as GetSession gives it", id, dump(r.Session), dump(stored))
		}
	}
	if q := got["open"].Queue; len(q) != 4 || q[2].ID != "s1" || q[2].Position != 1 || q[3].Position != 3 {
		t.Errorf("open's queue %s: want q1 q2 s1 q3 with per-kind positions", dump(q))
	}
	if e := got["open"].Elicitations; elicitationIDs(e) != "e2" || elicitationIDs(got["steered"].Elicitations) != "e3" {
		t.Errorf("pending elicitations: open %s, steered %s; want e2 and e3", dump(e), dump(got["steered"].Elicitations))
	}
	if empty, err := s.ListRecovery(ctx(t), nil); err != nil || len(empty) != 0 {
		t.Errorf("ListRecovery(nil) = %v, %v", empty, err)
	}
}

// testListLive checks that ListLive lists every session stored starting,
// active or stopping, with its shim's socket, and no other.
func testListLive(t *testing.T, open Opener) {
	s := fresh(t, open)
	if got, err := s.ListLive(ctx(t)); err != nil || len(got) != 0 {
		t.Fatalf("ListLive of an empty store = %v, %v", got, err)
	}
	want := map[string]berth.LiveSession{}
	for i, st := range []struct {
		state berth.State
		shim  string
	}{
		{berth.StateStarting, ""}, {berth.StateStarting, "/run/berth/shims/a.sock"},
		{berth.StateActive, ""}, {berth.StateActive, "/run/berth/shims/b.sock"},
		{berth.StateStopping, "/run/berth/shims/c.sock"}, {berth.StateStopped, ""},
	} {
		sess := newSession(fmt.Sprintf("s%d", i), base.Add(time.Duration(i)))
		create(t, s, sess)
		sess.ShimSocket, sess.ShimPID = st.shim, 10+i
		sess.State = st.state
		if err := s.UpdateSession(ctx(t), sess, ""); err != nil {
			t.Fatal(err)
		}
		if st.state != berth.StateStopped {
			want[sess.ID] = berth.LiveSession{ID: sess.ID, State: st.state, ShimSocket: st.shim}
		}
	}
	got, err := s.ListLive(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]berth.LiveSession{}
	for _, l := range got {
		byID[l.ID] = l
	}
	if len(got) != len(want) || !reflect.DeepEqual(byID, want) {
		t.Errorf("ListLive = %+v, want %+v", got, want)
	}
}

// seedRecovery gives the sessions of testListRecovery their turns, queue
// entries, permissions and elicitations.
func seedRecovery(t *testing.T, s berth.Store) {
	t.Helper()
	started, ended := berth.EventTurnStarted, berth.EventTurnEnded
	appendOK(t, s, turnEvents("open", [2]string{started, "t1"}, [2]string{ended, "t1"}, [2]string{started, "t2"}))
	appendOK(t, s, turnEvents("closed", [2]string{started, "t1"}, [2]string{ended, "t1"}))
	// The last turn_started's turn is open even though an older turn ends after it.
	appendOK(t, s, turnEvents("later-end", [2]string{started, "t1"}, [2]string{started, "t2"}, [2]string{ended, "t1"}))
	// A turn_ended of the same turn id before the last turn_started does not close it.
	appendOK(t, s, turnEvents("reopened", [2]string{started, "t1"}, [2]string{ended, "t1"}, [2]string{started, "t1"}))
	enqueue(t, s, entry("open", "q1", berth.EntryQueue, 7, base), 10)
	enqueue(t, s, entry("open", "q2", berth.EntryQueue, 7, base.Add(1)), 10)
	enqueue(t, s, entry("open", "s1", berth.EntrySteer, 7, base.Add(2)), 10)
	enqueue(t, s, entry("open", "q3", berth.EntryQueue, 7, base.Add(3)), 10)
	enqueue(t, s, entry("steered", "s2", berth.EntrySteer, 7, base), 10)
	enqueue(t, s, entry("steered", "s3", berth.EntrySteer, 7, base.Add(1)), 10) // replaces s2
	enqueue(t, s, entry("closed", "q4", berth.EntryQueue, 7, base), 10)
	if _, err := s.CancelQueueEntry(ctx(t), "closed", "q4"); err != nil {
		t.Fatal(err)
	}
	for i, p := range []*berth.Permission{permission("open", "p1", base), permission("open", "p2", base.Add(1)),
		permission("steered", "p3", base.Add(2)), permission("closed", "p4", base.Add(3))} {
		if err := s.CreatePermission(ctx(t), p); err != nil {
			t.Fatal(i, err)
		}
	}
	for i, e := range []*berth.Elicitation{elicitation("open", "e1", base), elicitation("open", "e2", base.Add(1)),
		elicitation("steered", "e3", base.Add(2)), elicitation("closed", "e4", base.Add(3))} {
		if err := s.CreateElicitation(ctx(t), e); err != nil {
			t.Fatal(i, err)
		}
	}
	e1, err := s.GetElicitation(ctx(t), "open", "e1")
	if err != nil {
		t.Fatal(err)
	}
	at := base.Add(time.Minute)
	e1.State, e1.Action, e1.DecidedBy, e1.ResolvedAt = berth.ElicitationDeclined, berth.ElicitationDecline, berth.DecidedByUser, &at
	if err := s.ResolveElicitation(ctx(t), e1); err != nil {
		t.Fatal(err)
	}
	p2, err := s.GetPermission(ctx(t), "open", "p2")
	if err != nil {
		t.Fatal(err)
	}
	p2.State, p2.OptionID, p2.DecidedBy, p2.DecidedAt = berth.PermissionDecided, "allow", berth.DecidedByUser, &at
	if err := s.DecidePermission(ctx(t), p2); err != nil {
		t.Fatal(err)
	}
}

// checkRecovery checks that r, session id's recovery, holds the queue and
// the pending permissions ListQueue and ListPermissions give.
func checkRecovery(t *testing.T, s berth.Store, id string, r *berth.Recovery) {
	t.Helper()
	queue, err := s.ListQueue(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(queue) == 0 {
		queue = nil
	}
	if !reflect.DeepEqual(normaliseEntries(r.Queue), normaliseEntries(queue)) {
		t.Errorf("%s: queue %s, want %s", id, dump(r.Queue), dump(queue))
	}
	pending, err := s.ListPermissions(ctx(t), id, berth.PermissionPending)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) == 0 {
		pending = nil
	}
	if dump(r.Pending) != dump(pending) {
		t.Errorf("%s: pending %s, want %s", id, dump(r.Pending), dump(pending))
	}
	elics, err := s.ListElicitations(ctx(t), id, berth.ElicitationPending)
	if err != nil {
		t.Fatal(err)
	}
	if len(elics) == 0 {
		elics = nil
	}
	if dump(r.Elicitations) != dump(elics) {
		t.Errorf("%s: pending elicitations %s, want %s", id, dump(r.Elicitations), dump(elics))
	}
}

// checkOpenTurn checks r's open turn: none unless wantOpen names the seq
// of session id's open turn_started, which it must be.
func checkOpenTurn(t *testing.T, s berth.Store, id string, r *berth.Recovery, wantOpen map[string]int64) {
	t.Helper()
	seq, open := wantOpen[id]
	switch {
	case !open && r.OpenTurn != nil:
		t.Errorf("%s: open turn %+v, want none", id, *r.OpenTurn)
	case open && (r.OpenTurn == nil || r.OpenTurn.Seq != seq):
		t.Errorf("%s: open turn %+v, want the turn_started at seq %d", id, r.OpenTurn, seq)
	case open:
		want := list(t, s, id, seq-1)[0]
		if dump(*r.OpenTurn) != dump(want) || !r.OpenTurn.Time.Equal(want.Time) {
			t.Errorf("%s: open turn %s, want %s", id, dump(*r.OpenTurn), dump(want))
		}
	}
}

// normaliseEntries makes entries comparable across backends (times in UTC).
func normaliseEntries(es []*berth.QueueEntry) []berth.QueueEntry {
	var out []berth.QueueEntry
	for _, e := range es {
		c := *e
		c.CreatedAt = c.CreatedAt.UTC()
		out = append(out, c)
	}
	return out
}

// dump is a value as JSON, for comparisons and messages.
func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
