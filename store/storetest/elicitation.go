package storetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// elicitation is a pending form elicitation of sessionID.
func elicitation(sessionID, id string, at time.Time) *berth.Elicitation {
	return &berth.Elicitation{ID: id, SessionID: sessionID, TurnID: "turn-1", Mode: berth.ElicitationModeForm,
		Message: "Your name ✓?", RequestedSchema: []byte(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`),
		CreatedAt: at}
}

// elicitationIDs joins the ids of es.
func elicitationIDs(es []*berth.Elicitation) string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return strings.Join(out, " ")
}

// testElicitations checks an elicitation's life in the store: created
// (and refused), read, resolved once, listed by state, and gone with its
// session.
func testElicitations(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("a", base), newSession("b", base))
	url := createElicitations(t, s)
	got := getElicitations(t, s, url)
	resolveElicitation(t, s, got)
	listElicitations(t, s)

	// Deleting a session takes its elicitations, and frees their ids.
	if err := s.DeleteSession(ctx(t), "a"); err != nil {
		t.Fatal(err)
	}
	_, err := s.GetElicitation(ctx(t), "a", "e1")
	wantCode(t, err, berth.ENotFound)
	if err := s.CreateElicitation(ctx(t), elicitation("b", "e1", base)); err != nil {
		t.Fatalf("an id of a deleted session: %v", err)
	}
}

// createElicitations creates the form elicitations e1, e2 and e3 of
// session a and the URL elicitation eb of b, which it returns, and checks
// that a taken id, a missing session and a bad schema or id are refused.
func createElicitations(t *testing.T, s berth.Store) *berth.Elicitation {
	t.Helper()
	for i, id := range []string{"e1", "e2", "e3"} {
		e := elicitation("a", id, base.Add(time.Duration(i)))
		if err := s.CreateElicitation(ctx(t), e); err != nil || e.State != berth.ElicitationPending {
			t.Fatalf("create %s: state %q, %v", id, e.State, err)
		}
	}
	url := &berth.Elicitation{ID: "eb", SessionID: "b", Mode: berth.ElicitationModeURL, Message: "sign in",
		URL: "https://example.com/x", ACPElicitationID: "acp-1", CreatedAt: base}
	if err := s.CreateElicitation(ctx(t), url); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.CreateElicitation(ctx(t), elicitation("a", "e1", base)), berth.EConflict)
	wantCode(t, s.CreateElicitation(ctx(t), elicitation("b", "e1", base)), berth.EConflict)
	wantCode(t, s.CreateElicitation(ctx(t), elicitation("nobody", "ex", base)), berth.ENotFound)
	bad := elicitation("a", "bad", base)
	bad.RequestedSchema = []byte(`{"type":`)
	wantCode(t, s.CreateElicitation(ctx(t), bad), berth.EInvalid)
	wantCode(t, s.CreateElicitation(ctx(t), elicitation("a", "", base)), berth.EInvalid)
	return url
}

// getElicitations checks that e2 and url read back as created, and only
// from their own session; it returns e2.
func getElicitations(t *testing.T, s berth.Store, url *berth.Elicitation) *berth.Elicitation {
	t.Helper()
	got, err := s.GetElicitation(ctx(t), "a", "e2")
	want := elicitation("a", "e2", base.Add(1))
	if err != nil || got.ID != "e2" || got.SessionID != "a" || got.Message != want.Message || got.Mode != berth.ElicitationModeForm ||
		!jsonSame(got.RequestedSchema, want.RequestedSchema) || got.State != berth.ElicitationPending ||
		!got.CreatedAt.Equal(want.CreatedAt) || got.ResolvedAt != nil || got.TurnID != "turn-1" || got.Content != nil {
		t.Fatalf("get e2: %+v, %v", got, err)
	}
	gu, err := s.GetElicitation(ctx(t), "b", "eb")
	if err != nil || gu.URL != url.URL || gu.ACPElicitationID != "acp-1" || gu.Mode != berth.ElicitationModeURL {
		t.Fatalf("get eb: %+v, %v", gu, err)
	}
	_, err = s.GetElicitation(ctx(t), "b", "e2")
	wantCode(t, err, berth.ENotFound)
	return got
}

// resolveElicitation accepts got (e2 of a) with content, checks that a
// second resolution, a missing one and one still pending are refused, and
// that the resolution sticks.
func resolveElicitation(t *testing.T, s berth.Store, got *berth.Elicitation) {
	t.Helper()
	at := base.Add(time.Minute)
	got.State, got.Action, got.DecidedBy, got.ResolvedAt = berth.ElicitationAccepted, berth.ElicitationAccept, berth.DecidedByUser, &at
	got.Content = map[string]any{"answer": "yes ✓", "n": 3.5}
	if err := s.ResolveElicitation(ctx(t), got); err != nil {
		t.Fatal(err)
	}
	second := *got
	second.State, second.Action = berth.ElicitationDeclined, berth.ElicitationDecline
	wantCode(t, s.ResolveElicitation(ctx(t), &second), berth.EConflict)
	missing := elicitation("a", "nope", base)
	missing.State = berth.ElicitationCancelled
	wantCode(t, s.ResolveElicitation(ctx(t), missing), berth.ENotFound)
	still := elicitation("a", "e1", base)
	wantCode(t, s.ResolveElicitation(ctx(t), still), berth.EInvalid)

	want := elicitation("a", "e2", base.Add(1))
	r, _ := s.GetElicitation(ctx(t), "a", "e2")
	if r.State != berth.ElicitationAccepted || r.Action != berth.ElicitationAccept || r.DecidedBy != berth.DecidedByUser ||
		r.ResolvedAt == nil || !r.ResolvedAt.Equal(at) || r.Content["answer"] != "yes ✓" || r.Content["n"] != 3.5 ||
		r.Message != want.Message || !jsonSame(r.RequestedSchema, want.RequestedSchema) {
		t.Fatalf("resolution did not stick: %+v", r)
	}
}

// listElicitations checks the lists of a's elicitations by state (e2
// accepted), an empty list of b's, and a missing session's.
func listElicitations(t *testing.T, s berth.Store) {
	t.Helper()
	pending, err := s.ListElicitations(ctx(t), "a", berth.ElicitationPending)
	if err != nil || elicitationIDs(pending) != "e1 e3" {
		t.Fatalf("pending of a: %q, %v", elicitationIDs(pending), err)
	}
	accepted, err := s.ListElicitations(ctx(t), "a", berth.ElicitationAccepted)
	if err != nil || elicitationIDs(accepted) != "e2" {
		t.Fatalf("accepted of a: %q, %v", elicitationIDs(accepted), err)
	}
	all, err := s.ListElicitations(ctx(t), "a", "")
	if err != nil || elicitationIDs(all) != "e1 e2 e3" {
		t.Fatalf("all of a: %q, %v", elicitationIDs(all), err)
	}
	none, err := s.ListElicitations(ctx(t), "b", berth.ElicitationDeclined)
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("declined of b: %v, %v", none, err)
	}
	_, err = s.ListElicitations(ctx(t), "nobody", "")
	wantCode(t, err, berth.ENotFound)
}

// testElicitationsReopen checks a pending elicitation outlives the store
// that held it, as a daemon restart needs.
func testElicitationsReopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	create(t, s, newSession("a", base))
	if err := s.CreateElicitation(ctx(t), elicitation("a", "e1", base)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	t.Cleanup(func() { _ = s.Close() })
	pending, err := s.ListElicitations(ctx(t), "a", berth.ElicitationPending)
	if err != nil || elicitationIDs(pending) != "e1" {
		t.Fatalf("pending after reopen: %q, %v", elicitationIDs(pending), err)
	}
}

// jsonSame reports whether two JSON texts hold the same value.
func jsonSame(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
