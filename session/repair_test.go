package session

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// kinds lists the kinds of repair items.
func kinds(items []berth.RepairItem) map[string]int {
	out := map[string]int{}
	for _, i := range items {
		out[i.Kind]++
	}
	return out
}

func TestRepairClosesWhatACrashLeftOpen(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{PermissionMode: berth.PermAsk})
	e.promptOK(s.ID, "ask delete everything", "")
	e.pendingPermission(s.ID)
	// An active session is not repaired.
	rep, err := e.m.Repair(ctx, s.ID, false, false)
	if err != nil || kinds(rep.Issues)[berth.RepairSessionNotStopped] != 1 || rep.Persisted || len(rep.Actions) != 0 {
		t.Fatalf("repair of an active session: %+v, %v", rep, err)
	}
	// The daemon dies with the tool call pending.
	e.crash()

	// Boot closed the turn's pending tool call inside the turn, before its
	// turn_ended: nothing is left for repair.
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	tail := evs[len(evs)-4:]
	if tail[0].Type != berth.EventPermissionResolved || tail[1].Type != berth.EventToolCallUpdate ||
		!containsAll(string(tail[1].Data), `"status":"failed"`, `"interrupted":true`) || tail[1].TurnID != tail[2].TurnID ||
		tail[2].Type != berth.EventTurnEnded || tail[3].Type != berth.EventSessionStopped {
		t.Fatalf("log tail after boot: %v", types(tail))
	}
	rep, err = e.m.Repair(ctx, s.ID, false, false)
	if err != nil || len(rep.Issues) != 0 || len(rep.Actions) != 0 || rep.Persisted {
		t.Fatalf("repair after boot: %+v, %v", rep, err)
	}
}

func TestRepairFailsDanglingCallsAppendOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "echo fine")
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	// A log a crash left behind: a call that never finished in a turn
	// that never ended, after the session_stopped.
	for _, ev := range []berth.Event{
		berth.NewEvent(s.ID, "turn_x", berth.EventTurnStarted, map[string]string{"text": "x"}),
		berth.NewEvent(s.ID, "turn_x", berth.EventToolCall, map[string]string{"tool_call_id": "call-9", "status": "in_progress"}),
	} {
		if _, err := e.log.AppendSync(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	before := len(e.events(s.ID))
	rep, err := e.m.Repair(ctx, s.ID, true, true)
	if err != nil || kinds(rep.Issues)[berth.RepairDanglingToolCall] != 1 || kinds(rep.Issues)[berth.RepairOpenTurn] != 1 ||
		rep.Persisted || len(rep.Actions) != 3 {
		t.Fatalf("dry run: %+v, %v", rep, err)
	}
	if after := len(e.events(s.ID)); after != before {
		t.Fatalf("a dry run appended %d events", after-before)
	}
	if rep, err = e.m.Repair(ctx, s.ID, false, true); err != nil || !rep.Persisted {
		t.Fatalf("repair: %+v, %v", rep, err)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	tail := evs[len(evs)-3:]
	if tail[0].Type != berth.EventToolCallUpdate || tail[0].TurnID != "turn_x" || !containsAll(string(tail[0].Data), `"status":"failed"`, `"interrupted":true`) ||
		tail[1].Type != berth.EventTurnEnded || tail[2].Type != berth.EventSessionStopped {
		t.Fatalf("repaired tail: %v", types(tail))
	}
	if rep, err = e.m.Repair(ctx, s.ID, false, true); err != nil || len(rep.Issues) != 0 || len(rep.Actions) != 0 {
		t.Fatalf("second repair: %+v, %v", rep, err)
	}
}

func TestRepairOfAUserStoppedSessionNeedsForce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	// A healthy stopped log has nothing to repair.
	if rep, err := e.m.Repair(ctx, s.ID, false, false); err != nil || len(rep.Issues) != 0 {
		t.Fatalf("healthy: %+v, %v", rep, err)
	}
	// Make it unhealthy: an open turn appended after the fact.
	if _, err := e.log.AppendSync(ctx, berth.NewEvent(s.ID, "turn_x", berth.EventTurnStarted, map[string]string{"text": "x"})); err != nil {
		t.Fatal(err)
	}
	rep, err := e.m.Repair(ctx, s.ID, false, false)
	if err != nil || rep.Persisted || kinds(rep.Issues)[berth.RepairForceRequired] != 1 || kinds(rep.Issues)[berth.RepairOpenTurn] != 1 {
		t.Fatalf("without force: %+v, %v", rep, err)
	}
	if rep, err = e.m.Repair(ctx, s.ID, false, true); err != nil || !rep.Persisted {
		t.Fatalf("with force: %+v, %v", rep, err)
	}
	if rep, err = e.m.Repair(ctx, s.ID, false, true); err != nil || len(rep.Issues) != 0 {
		t.Fatalf("again: %+v, %v", rep, err)
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
