package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// pendingPermission waits for the one pending permission of a session.
func (e *env) pendingPermission(id string) *berth.Permission {
	e.t.Helper()
	return pendingOne(e, "permission", func() ([]*berth.Permission, error) {
		return e.m.ListPermissions(context.Background(), id, berth.PermissionPending)
	})
}

// resolutions returns the data of a session's permission_resolved events.
func (e *env) resolutions(id string) []live.ResolvedData {
	return eventData[live.ResolvedData](e, id, berth.EventPermissionResolved)
}

func TestAskModeWaitsForTheUsersDecision(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	r := e.promptOK(s.ID, "ask delete everything", "")
	p := e.pendingPermission(s.ID)
	if !strings.HasPrefix(p.ID, "perm_") || p.TurnID != r.TurnID || len(p.Options) != 3 ||
		!strings.Contains(string(p.ToolCall), "delete everything") || p.State != berth.PermissionPending {
		t.Fatalf("pending permission: %+v", p)
	}
	// The stored request is listed a moment before the session counts it.
	waitFor(t, "the session waiting", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.Badge == berth.BadgeWaiting && got.PendingPermissions == 1
	})
	// Bad decisions are refused and decide nothing.
	for _, bad := range []berth.PermissionDecision{{Decision: "maybe"}, {OptionID: "nope"}, {}, {OptionID: "allow", Decision: "allow_once"}} {
		if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, bad); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("decision %+v = %v, want invalid_argument", bad, err)
		}
	}
	if _, err := e.m.DecidePermission(ctx, s.ID, "perm_nope", berth.PermissionDecision{Decision: "allow_once"}); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("unknown permission = %v", err)
	}
	d, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionAllowOnce})
	if err != nil || d.State != berth.PermissionDecided || d.DecidedBy != berth.DecidedByUser || d.OptionID != "allow" || d.DecidedAt == nil {
		t.Fatalf("decide: %+v, %v", d, err)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnEndTurn || !strings.Contains(res.Text, "permission: allow") {
		t.Fatalf("turn: %+v", res)
	}
	if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionRejectOnce}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("second decision = %v, want conflict", err)
	}
	if rs := e.resolutions(s.ID); len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByUser || rs[0].OptionID != "allow" || rs[0].PermissionID != p.ID {
		t.Fatalf("resolutions: %+v", rs)
	}
	stored, _ := e.m.ListPermissions(ctx, s.ID, "")
	if len(stored) != 1 || stored[0].State != berth.PermissionDecided {
		t.Fatalf("stored: %+v", stored)
	}
	if got, _ := e.m.GetSession(ctx, s.ID); got.Badge != berth.BadgeIdle || got.PendingPermissions != 0 {
		t.Fatalf("session after: badge %s, pending %d", got.Badge, got.PendingPermissions)
	}
}

func TestAllowAlwaysIsRememberedForTheToolKind(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	r := e.promptOK(s.ID, "ask edit one", "")
	p := e.pendingPermission(s.ID)
	if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{OptionID: "allow_always"}); err != nil {
		t.Fatal(err)
	}
	e.waitResult(s.ID, r.TurnID)
	// The same kind of tool call is not asked again.
	res := e.prompt(s.ID, "ask edit two")
	if !strings.Contains(res.Text, "permission: allow") {
		t.Fatalf("second ask: %+v", res)
	}
	rs := e.resolutions(s.ID)
	if len(rs) != 2 || rs[1].DecidedBy != berth.DecidedByPolicy || !rs[1].Remembered || rs[1].OptionID != "allow" {
		t.Fatalf("resolutions: %+v", rs)
	}
}

func TestCancelAnswersAPendingPermission(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	r := e.promptOK(s.ID, "ask delete everything", "")
	p := e.pendingPermission(s.ID)
	if _, err := e.m.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.StopReason != berth.TurnCancelled {
		t.Fatalf("turn: %+v", res)
	}
	rs := e.resolutions(s.ID)
	if len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByCancel || rs[0].PermissionID != p.ID {
		t.Fatalf("resolutions: %+v", rs)
	}
	got, err := e.store.GetPermission(ctx, s.ID, p.ID)
	if err != nil || got.State != berth.PermissionCanceled || got.DecidedBy != berth.DecidedByCancel {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: "allow_once"}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("deciding a canceled permission = %v", err)
	}
}

func TestUnansweredPermissionTimesOut(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.PermissionTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	res := e.prompt(s.ID, "ask delete everything")
	if !strings.Contains(res.Text, "permission: rejected") {
		t.Fatalf("turn: %+v", res)
	}
	rs := e.resolutions(s.ID)
	if len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByTimeout || rs[0].OptionID != "reject" {
		t.Fatalf("resolutions: %+v", rs)
	}
	ps, _ := e.m.ListPermissions(ctx, s.ID, berth.PermissionExpired)
	if len(ps) != 1 || ps[0].DecidedBy != berth.DecidedByTimeout {
		t.Fatalf("expired: %+v", ps)
	}
}

func TestAPendingPermissionDelaysNoOtherSession(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	asking := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	other := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	r := e.promptOK(asking.ID, "ask delete everything", "")
	p := e.pendingPermission(asking.ID)
	// The other session's turns run to their end while the question waits.
	for range 5 {
		if res := e.prompt(other.ID, "echo unaffected"); res.Text != "unaffected" {
			t.Fatalf("other session: %+v", res)
		}
	}
	if still, _ := e.m.ListPermissions(ctx, asking.ID, berth.PermissionPending); len(still) != 1 {
		t.Fatalf("the question did not wait: %+v", still)
	}
	if _, err := e.m.DecidePermission(ctx, asking.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionRejectOnce}); err != nil {
		t.Fatal(err)
	}
	if res := e.waitResult(asking.ID, r.TurnID); !strings.Contains(res.Text, "permission: rejected") {
		t.Fatalf("asking session: %+v", res)
	}
}

func TestPendingPermissionsAreCanceledAfterACrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	r := e.promptOK(s.ID, "ask delete everything", "")
	p := e.pendingPermission(s.ID)
	e.crash()

	got, err := e.store.GetPermission(ctx, s.ID, p.ID)
	if err != nil || got.State != berth.PermissionCanceled || got.DecidedBy != berth.DecidedByCancel {
		t.Fatalf("permission after the crash: %+v, %v", got, err)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	tt := types(evs)
	// The question is answered, then its pending tool call fails, then the turn closes.
	want := []string{berth.EventPermissionResolved, berth.EventToolCallUpdate, berth.EventTurnEnded, berth.EventSessionStopped}
	if strings.Join(tt[len(tt)-4:], ",") != strings.Join(want, ",") || evs[len(evs)-2].TurnID != r.TurnID {
		t.Fatalf("log tail: %v", tt[len(tt)-5:])
	}
	if sess, _ := e.m.GetSession(ctx, s.ID); sess.PendingPermissions != 0 || sess.Badge != berth.BadgeFailed {
		t.Fatalf("session: pending %d badge %s", sess.PendingPermissions, sess.Badge)
	}
}

// slowPermissionStore holds CreatePermission back until released, so a
// cancel lands while the record is being written.
type slowPermissionStore struct {
	berth.Store
	entered, release chan struct{}
}

func (s slowPermissionStore) CreatePermission(ctx context.Context, p *berth.Permission) error {
	close(s.entered)
	<-s.release
	return s.Store.CreatePermission(ctx, p)
}

func TestACancelWhileARequestIsStoredAnswersIt(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	e := newEnv(t, func(o *Options) {
		o.Store = slowPermissionStore{Store: o.Store, entered: entered, release: release}
		o.Limits.CancelGrace = 3 * time.Second
	})
	ctx := context.Background()
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	r := e.promptOK(s.ID, "ask delete everything", "")
	<-entered
	_, err := e.m.Cancel(ctx, s.ID)
	// The record is written only once the cancel has been taken.
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if res := e.waitResult(s.ID, r.TurnID); res.StopReason != berth.TurnCancelled {
		t.Fatalf("turn: %+v", res)
	}
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.State != berth.StateActive || got.PendingPermissions != 0 {
		t.Fatalf("session: %s pending %d (%v)", got.State, got.PendingPermissions, got.Failure)
	}
	rs := e.resolutions(s.ID)
	if len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByCancel {
		t.Fatalf("resolutions: %+v", rs)
	}
	// turn_ended is the turn's last event.
	evs := e.events(s.ID)
	ended := false
	for _, ev := range evs {
		if ev.TurnID == r.TurnID && ended {
			t.Fatalf("%s after turn_ended", ev.Type)
		}
		if ev.TurnID == r.TurnID && ev.Type == berth.EventTurnEnded {
			ended = true
		}
	}
}

// approve-reads, the default, asks for an edit as ask does: it waits for
// the user, whose allow reaches the agent, or else for the timeout.
func TestApproveReadsAsksForAnEdit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if s.PermissionMode != berth.PermApproveReads {
		t.Fatalf("default permission_mode = %q", s.PermissionMode)
	}
	r := e.promptOK(s.ID, "ask may I edit?", "")
	p := e.pendingPermission(s.ID)
	// The stored request is listed a moment before the session counts it.
	waitFor(t, "the session waiting", func() bool {
		got, _ := e.m.GetSession(ctx, s.ID)
		return got.Badge == berth.BadgeWaiting && got.PendingPermissions == 1
	})
	if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionAllowOnce}); err != nil {
		t.Fatal(err)
	}
	if res := e.waitResult(s.ID, r.TurnID); !strings.Contains(res.Text, "permission: allow") {
		t.Fatalf("turn: %+v", res)
	}
	if rs := e.resolutions(s.ID); len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByUser || rs[0].OptionID != "allow" {
		t.Fatalf("resolutions: %+v", rs)
	}
}

func TestApproveReadsRejectsAnUnansweredEditAtTheTimeout(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.PermissionTimeout = 300 * time.Millisecond })
	s := e.create(berth.CreateRequest{})
	if res := e.prompt(s.ID, "ask may I edit?"); !strings.Contains(res.Text, "permission: rejected") {
		t.Fatalf("turn: %+v", res)
	}
	if rs := e.resolutions(s.ID); len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByTimeout || rs[0].OptionID != "reject" {
		t.Fatalf("resolutions: %+v", rs)
	}
}
