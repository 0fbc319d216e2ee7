package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// pendingElicitation waits for the one pending elicitation of a session.
func (e *env) pendingElicitation(id string) *berth.Elicitation {
	e.t.Helper()
	return pendingOne(e, "elicitation", func() ([]*berth.Elicitation, error) {
		return e.m.ListElicitations(context.Background(), id, berth.ElicitationPending)
	})
}

// elicitationResolutions returns the data of a session's
// elicitation_resolved events.
func (e *env) elicitationResolutions(id string) []live.ElicResolvedData {
	return eventData[live.ElicResolvedData](e, id, berth.EventElicitationResolved)
}

func TestElicitationWaitsForTheUsersAnswer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	r := e.promptOK(s.ID, "elicit Your name?\necho after", "")
	el := e.pendingElicitation(s.ID)
	if !strings.HasPrefix(el.ID, "elic_") || el.TurnID != r.TurnID || el.Mode != berth.ElicitationModeForm ||
		el.Message != "Your name?" || !strings.Contains(string(el.RequestedSchema), `"answer"`) || el.State != berth.ElicitationPending {
		t.Fatalf("pending elicitation: %+v", el)
	}
	// The stored request is listed a moment before the session counts it.
	waitFor(t, "the session waiting", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.Badge == berth.BadgeWaiting && got.PendingElicitations == 1
	})
	if n := len(ofType(e.events(s.ID), berth.EventElicitationRequested)); n != 1 {
		t.Fatalf("%d elicitation_requested events", n)
	}
	// Answers the schema refuses are refused and answer nothing.
	for _, bad := range []struct {
		a     berth.ElicitationAnswer
		field string
	}{
		{berth.ElicitationAnswer{Action: berth.ElicitationAccept}, "answer"},
		{berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: map[string]any{"answer": 42}}, "answer"},
		{berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: map[string]any{"answer": "x", "other": "y"}}, "other"},
		{berth.ElicitationAnswer{Action: "maybe"}, ""},
		{berth.ElicitationAnswer{Action: berth.ElicitationDecline, Content: map[string]any{"answer": "x"}}, ""},
	} {
		_, err := e.m.AnswerElicitation(ctx, s.ID, el.ID, bad.a)
		if !berth.IsCode(err, berth.EInvalid) || (bad.field != "" && !strings.Contains(err.Error(), "content."+bad.field)) {
			t.Fatalf("answer %+v = %v, want invalid_argument naming %q", bad.a, err, bad.field)
		}
	}
	if _, err := e.m.AnswerElicitation(ctx, s.ID, "elic_nope", berth.ElicitationAnswer{Action: "decline"}); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("unknown elicitation = %v", err)
	}
	a, err := e.m.AnswerElicitation(ctx, s.ID, el.ID, berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: map[string]any{"answer": "Ada"}})
	if err != nil || a.State != berth.ElicitationAccepted || a.Action != berth.ElicitationAccept || a.DecidedBy != berth.DecidedByUser ||
		a.ResolvedAt == nil || a.Content["answer"] != "Ada" {
		t.Fatalf("answer: %+v, %v", a, err)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnEndTurn || res.Text != "answer: Ada\nafter" {
		t.Fatalf("turn: %+v", res)
	}
	if _, err := e.m.AnswerElicitation(ctx, s.ID, el.ID, berth.ElicitationAnswer{Action: berth.ElicitationDecline}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("second answer = %v, want conflict", err)
	}
	rs := e.elicitationResolutions(s.ID)
	if len(rs) != 1 || rs[0].ElicitationID != el.ID || rs[0].Action != berth.ElicitationAccept || rs[0].DecidedBy != berth.DecidedByUser || rs[0].Content["answer"] != "Ada" {
		t.Fatalf("resolutions: %+v", rs)
	}
	stored, err := e.store.GetElicitation(ctx, s.ID, el.ID)
	if err != nil || stored.State != berth.ElicitationAccepted || stored.Content["answer"] != "Ada" {
		t.Fatalf("stored: %+v, %v", stored, err)
	}
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.Badge != berth.BadgeIdle || got.PendingElicitations != 0 {
		t.Fatalf("session after: badge %s, pending %d", got.Badge, got.PendingElicitations)
	}
}

func TestElicitationDeclined(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	r := e.promptOK(s.ID, "elicit Proceed?", "")
	el := e.pendingElicitation(s.ID)
	if _, err := e.m.AnswerElicitation(context.Background(), s.ID, el.ID, berth.ElicitationAnswer{Action: berth.ElicitationDecline}); err != nil {
		t.Fatal(err)
	}
	if res := e.waitResult(s.ID, r.TurnID); res.StopReason != berth.TurnEndTurn || res.Text != "elicitation decline" {
		t.Fatalf("turn: %+v", res)
	}
	ds, _ := e.m.ListElicitations(context.Background(), s.ID, berth.ElicitationDeclined)
	if len(ds) != 1 || ds[0].ID != el.ID {
		t.Fatalf("declined: %+v", ds)
	}
}

func TestCancelAnswersAPendingElicitation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	r := e.promptOK(s.ID, "elicit Your name?", "")
	el := e.pendingElicitation(s.ID)
	if _, err := e.m.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnCancelled || !strings.Contains(res.Text, "elicitation cancel") {
		t.Fatalf("turn: %+v", res)
	}
	rs := e.elicitationResolutions(s.ID)
	if len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByCancel || rs[0].Action != berth.ElicitationCancel {
		t.Fatalf("resolutions: %+v", rs)
	}
	got, err := e.store.GetElicitation(ctx, s.ID, el.ID)
	if err != nil || got.State != berth.ElicitationCancelled || got.DecidedBy != berth.DecidedByCancel {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	if _, err := e.m.AnswerElicitation(ctx, s.ID, el.ID, berth.ElicitationAnswer{Action: "decline"}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("answering a cancelled elicitation = %v", err)
	}
	// The resolution comes before the turn's end in the log.
	tt := types(e.events(s.ID))
	if i, j := strings.Index(strings.Join(tt, ","), berth.EventElicitationResolved), strings.Index(strings.Join(tt, ","), berth.EventTurnEnded); i < 0 || i > j {
		t.Fatalf("log: %v", tt)
	}
}

func TestStopCancelsAPendingElicitation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.promptOK(s.ID, "elicit Your name?", "")
	el := e.pendingElicitation(s.ID)
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	got, err := e.store.GetElicitation(ctx, s.ID, el.ID)
	if err != nil || got.State != berth.ElicitationCancelled {
		t.Fatalf("stored after stop: %+v, %v", got, err)
	}
	sess, _ := e.m.GetSession(ctx, s.ID)
	if sess.PendingElicitations != 0 || sess.State != berth.StateStopped {
		t.Fatalf("session after stop: %+v", sess)
	}
}

func TestPendingElicitationsAreCancelledAfterACrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	r := e.promptOK(s.ID, "elicit Your name?", "")
	el := e.pendingElicitation(s.ID)
	e.crash()
	got, err := e.store.GetElicitation(ctx, s.ID, el.ID)
	if err != nil || got.State != berth.ElicitationCancelled || got.DecidedBy != berth.DecidedByCancel {
		t.Fatalf("elicitation after the crash: %+v, %v", got, err)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	rs := ofType(evs, berth.EventElicitationResolved)
	if len(rs) != 1 || rs[0].TurnID != r.TurnID {
		t.Fatalf("resolutions after the crash: %+v", rs)
	}
	sess, _ := e.m.GetSession(ctx, s.ID)
	if sess.PendingElicitations != 0 {
		t.Fatalf("pending after the crash: %d", sess.PendingElicitations)
	}
}

// An elicitation pending at the shutdown is pending in the next manager
// under the same id; answering it there completes the turn.
func TestDetachKeepsAPendingElicitation(t *testing.T) {
	e := newShimEnv(t)
	s := e.create(berth.CreateRequest{})
	r, err := e.m.Prompt(context.Background(), s.ID, berth.PromptRequest{Text: "elicit Your name?\necho after"})
	if err != nil {
		t.Fatal(err)
	}
	el := e.pendingElicitation(s.ID)

	e.detachAndReopen(withShims(e.home))
	var again *berth.Elicitation
	waitFor(t, "the elicitation to be waited on again", func() bool {
		got, _ := e.m.GetSession(context.Background(), s.ID)
		return got != nil && got.PendingElicitations == 1 && got.Badge == berth.BadgeWaiting
	})
	again = e.pendingElicitation(s.ID)
	if again.ID != el.ID {
		t.Fatalf("pending after reattach = %+v, want %s", again, el.ID)
	}
	if _, err := e.m.AnswerElicitation(context.Background(), s.ID, el.ID,
		berth.ElicitationAnswer{Action: berth.ElicitationAccept, Content: map[string]any{"answer": "Grace"}}); err != nil {
		t.Fatal(err)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, "answer: Grace") || !strings.Contains(res.Text, "after") {
		t.Fatalf("turn after the answer: %+v", res)
	}
	if n := len(ofType(e.events(s.ID), berth.EventElicitationRequested)); n != 1 {
		t.Fatalf("%d elicitation_requested events, want 1", n)
	}
	e.closeAndWaitShims(s.ID)
}

// A url elicitation is accepted without content: the manager refuses an
// answer with content before the session sees it.
func TestURLElicitationIsAcceptedWithoutContent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	el := &berth.Elicitation{ID: "eli_url", SessionID: s.ID, Mode: berth.ElicitationModeURL, Message: "sign in",
		URL: "https://example.com/login", State: berth.ElicitationPending, CreatedAt: time.Now().UTC()}
	if err := e.store.CreateElicitation(ctx, el); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.AnswerElicitation(ctx, s.ID, el.ID, berth.ElicitationAnswer{Action: "accept", Content: map[string]any{"x": 1}})
	if !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("url accepted with content = %v, want invalid", err)
	}
	if got, _ := e.store.GetElicitation(ctx, s.ID, el.ID); got.State != berth.ElicitationPending {
		t.Fatalf("the refused answer changed the elicitation: %+v", got)
	}
}
