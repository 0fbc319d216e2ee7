package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// startBusy starts a long turn and waits until the agent is in it.
func (e *env) startBusy(id, text string) string {
	e.t.Helper()
	r, err := e.m.Prompt(context.Background(), id, berth.PromptRequest{Text: text})
	if err != nil || r.Status != "started" {
		e.t.Fatalf("busy turn: %+v, %v", r, err)
	}
	waitFor(e.t, "the turn to be under way", func() bool {
		for _, ev := range e.events(id) {
			if ev.TurnID == r.TurnID && ev.Type == berth.EventAgentMessage {
				return true
			}
		}
		return false
	})
	return r.TurnID
}

// promptOK sends a prompt that must be accepted.
func (e *env) promptOK(id, text, mode string) *berth.PromptResult {
	e.t.Helper()
	r, err := e.m.Prompt(context.Background(), id, berth.PromptRequest{Text: text, Mode: mode})
	if err != nil {
		e.t.Fatalf("prompt %q (%s): %v", text, mode, err)
	}
	return r
}

// waitResult waits for a turn (or queued entry) and returns its result.
func (e *env) waitResult(id, target string) *berth.TurnResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.m.WaitTurn(ctx, id, target)
	if err != nil {
		e.t.Fatalf("wait %s: %v", target, err)
	}
	return res
}

// started lists the turn_started events of a log as "source:text".
func started(evs []berth.Event) []string {
	var out []string
	for _, ev := range ofType(evs, berth.EventTurnStarted) {
		var d live.TurnStartedData
		_ = json.Unmarshal(ev.Data, &d)
		out = append(out, d.Source+":"+d.Text)
	}
	return out
}

func TestQueuedPromptsRunFIFOEachAsItsOwnTurn(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	busy := e.startBusy(s.ID, "sleep 600")
	q1 := e.promptOK(s.ID, "echo one", "")
	q2 := e.promptOK(s.ID, "echo two", berth.ModeQueue)
	if q1.Status != "queued" || q1.Position != 1 || q2.Position != 2 || q1.EntryID == "" || q1.EntryID == q2.EntryID {
		t.Fatalf("queued answers: %+v %+v", q1, q2)
	}
	view, err := e.m.ListQueue(context.Background(), s.ID)
	if err != nil || len(view.Entries) != 2 || view.Entries[0].ID != q1.EntryID || view.Entries[1].Position != 2 {
		t.Fatalf("queue: %+v, %v", view, err)
	}
	if got, _ := e.m.GetSession(context.Background(), s.ID); got.Queue.Pending != 2 {
		t.Fatalf("session queue = %+v", got.Queue)
	}
	r1, r2 := e.waitResult(s.ID, q1.EntryID), e.waitResult(s.ID, q2.EntryID)
	if r1.Text != "one" || r2.Text != "two" || r1.TurnID == r2.TurnID || r1.TurnID == busy {
		t.Fatalf("results: %+v %+v", r1, r2)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	if got := strings.Join(started(evs), "|"); got != "user:sleep 600|queue:echo one|queue:echo two" {
		t.Fatalf("turns: %s", got)
	}
	// Each queued turn starts only after the previous one ended.
	open := 0
	for _, ev := range evs {
		switch ev.Type {
		case berth.EventTurnStarted:
			open++
		case berth.EventTurnEnded:
			open--
		}
		if open > 1 {
			t.Fatalf("two turns overlap: %v", types(evs))
		}
	}
	if view, _ := e.m.ListQueue(context.Background(), s.ID); len(view.Entries) != 0 {
		t.Fatalf("queue after the run: %+v", view.Entries)
	}
}

func TestQueueFullAndADeletedEntryNeverRuns(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.MaxQueue = 10 })
	s := e.create(berth.CreateRequest{})
	ctx := context.Background()
	e.startBusy(s.ID, "sleep 60000")
	var entries []*berth.PromptResult
	for i := range 10 {
		entries = append(entries, e.promptOK(s.ID, fmt.Sprintf("echo entry %d", i), ""))
	}
	before := len(e.events(s.ID))
	_, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo eleventh"})
	if !berth.IsCode(err, berth.EQueueFull) {
		t.Fatalf("11th prompt = %v, want queue_full", err)
	}
	if view, _ := e.m.ListQueue(ctx, s.ID); len(view.Entries) != 10 {
		t.Fatalf("the refused prompt was stored: %d entries", len(view.Entries))
	}
	// The busy turn's sleep ticks (agent_message every 100 ms) go on
	// meanwhile; anything else is the refused prompt's.
	for _, ev := range e.events(s.ID)[before:] {
		if ev.Type != berth.EventAgentMessage {
			t.Fatalf("the refused prompt logged %s: %s", ev.Type, ev.Data)
		}
	}
	gone := entries[3].EntryID
	if err := e.m.CancelQueueEntry(ctx, s.ID, gone); err != nil {
		t.Fatal(err)
	}
	if err := e.m.CancelQueueEntry(ctx, s.ID, gone); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("second delete = %v, want not_found", err)
	}
	if _, err := e.m.WaitTurn(ctx, s.ID, gone); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("waiting on a canceled entry = %v, want conflict", err)
	}
	if _, err := e.m.Cancel(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	last := e.waitResult(s.ID, entries[9].EntryID)
	if last.Text != "entry 9" {
		t.Fatalf("last entry: %+v", last)
	}
	turns := started(e.events(s.ID))
	if len(turns) != 10 {
		t.Fatalf("turns: %v", turns)
	}
	for _, tx := range turns {
		if tx == "queue:echo entry 3" {
			t.Fatalf("the deleted entry ran: %v", turns)
		}
	}
	canceled := ofType(e.events(s.ID), berth.EventPromptCanceled)
	if len(canceled) != 1 || !strings.Contains(string(canceled[0].Data), gone) {
		t.Fatalf("prompt_canceled: %v", canceled)
	}
}

func TestInterruptCancelsTheTurnAndEveryPendingEntry(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	ctx := context.Background()
	busy := e.startBusy(s.ID, "sleep 60000")
	e.promptOK(s.ID, "echo stale one", "")
	e.promptOK(s.ID, "echo stale two", "")
	gen0 := s.Queue.Generation
	r := e.promptOK(s.ID, "echo fresh", berth.ModeInterrupt)
	if r.Status != "started" || r.InterruptedTurnID != busy || r.CanceledEntries == nil || *r.CanceledEntries != 2 ||
		r.Generation != gen0+1 || r.TurnID == "" {
		t.Fatalf("interrupt answer: %+v", r)
	}
	// The interrupt's turn can be waited on before it has started.
	fresh := make(chan *berth.TurnResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := e.m.WaitTurn(ctx, s.ID, r.TurnID)
		if err != nil {
			t.Errorf("wait for the interrupt's turn: %v", err)
		}
		fresh <- res
	}()
	old := e.waitResult(s.ID, busy)
	if res := <-fresh; res == nil || res.Text != "fresh" {
		t.Fatalf("interrupt's turn waited early: %+v", res)
	}
	if old.StopReason != berth.TurnCancelled {
		t.Fatalf("interrupted turn ended %s", old.StopReason)
	}
	res := e.waitResult(s.ID, r.TurnID)
	if res.Text != "fresh" || res.StopReason != berth.TurnEndTurn {
		t.Fatalf("new turn: %+v", res)
	}
	// Give a stray dispatch the time to show itself.
	e.prompt(s.ID, "echo later")
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.Queue.Generation != gen0+1 || got.Queue.Pending != 0 {
		t.Fatalf("session queue = %+v", got.Queue)
	}
	turns := strings.Join(started(e.events(s.ID)), "|")
	if turns != "user:sleep 60000|user:echo fresh|user:echo later" {
		t.Fatalf("turns: %s", turns)
	}
	if n := len(ofType(e.events(s.ID), berth.EventPromptCanceled)); n != 2 {
		t.Fatalf("%d prompt_canceled events", n)
	}
}

func TestOnlyTheLastSteerReachesTheAgent(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	ctx := context.Background()
	if _, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo x", Mode: berth.ModeSteer}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("steer on idle = %v, want conflict", err)
	}
	busy := e.startBusy(s.ID, "sleep 500")
	first := e.promptOK(s.ID, "echo first steer", berth.ModeSteer)
	second := e.promptOK(s.ID, "echo second steer", berth.ModeSteer)
	if first.Status != "staged" || second.Status != "staged" || first.EntryID == second.EntryID {
		t.Fatalf("steer answers: %+v %+v", first, second)
	}
	if _, err := e.m.WaitTurn(ctx, s.ID, first.EntryID); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("the replaced steer = %v, want conflict", err)
	}
	// The sleep has no tool call: the steer runs as the next turn.
	res := e.waitResult(s.ID, second.EntryID)
	if res.Text != "second steer" || res.TurnID == busy {
		t.Fatalf("steer turn: %+v", res)
	}
	evs := e.events(s.ID)
	if turns := strings.Join(started(evs), "|"); turns != "user:sleep 500|steer:echo second steer" {
		t.Fatalf("turns: %s", turns)
	}
	for _, ev := range ofType(evs, berth.EventAgentMessage) {
		if strings.Contains(string(ev.Data), "first steer") {
			t.Fatalf("the replaced steer reached the agent: %s", ev.Data)
		}
	}
	canceled := ofType(evs, berth.EventPromptCanceled)
	if len(canceled) != 1 || !strings.Contains(string(canceled[0].Data), first.EntryID) {
		t.Fatalf("prompt_canceled: %v", canceled)
	}
}

func TestSteerIsDeliveredAtTheNextToolCallBoundary(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	busy := e.startBusy(s.ID, "sleep 400\nwrite notes.txt hello\nsleep 60000\necho never")
	st := e.promptOK(s.ID, "echo steered in", berth.ModeSteer)
	res := e.waitResult(s.ID, busy)
	if res.StopReason != berth.TurnEndTurn || !strings.HasSuffix(res.Text, "steered in") || strings.Contains(res.Text, "never") {
		t.Fatalf("turn result: %+v", res)
	}
	if via := e.waitResult(s.ID, st.EntryID); via.TurnID != busy {
		t.Fatalf("the steer ran in turn %s, want %s", via.TurnID, busy)
	}
	evs := e.events(s.ID)
	if n := len(ofType(evs, berth.EventTurnStarted)); n != 1 {
		t.Fatalf("%d turns, want the steer inside the first", n)
	}
	// prompt_steered is in the turn, after the tool call finished and
	// before the steer's answer.
	var order []string
	for _, ev := range evs {
		switch {
		case ev.Type == berth.EventPromptSteered:
			if ev.TurnID != busy {
				t.Fatalf("prompt_steered outside the turn: %+v", ev)
			}
			order = append(order, "steered")
		case ev.Type == berth.EventToolCallUpdate && strings.Contains(string(ev.Data), `"completed"`):
			order = append(order, "tool done")
		case ev.Type == berth.EventAgentMessage && strings.Contains(string(ev.Data), "steered in"):
			order = append(order, "answer")
		}
	}
	if strings.Join(order, ",") != "tool done,steered,answer" {
		t.Fatalf("order: %v", order)
	}
}

func TestQueuedPromptsSurviveACrashAndRunOnceInOrder(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.startBusy(s.ID, "sleep 60000")
	a := e.promptOK(s.ID, "echo first after crash", "")
	b := e.promptOK(s.ID, "echo second after crash", "")
	// The daemon dies: nothing is closed, the agent is left behind.
	e.crash()

	// The new daemon resumes the session by itself, to run what it queued.
	waitFor(t, "the session to resume", func() bool { return e.m.set.liveOf(s.ID) != nil })
	ra, rb := e.waitResult(s.ID, a.EntryID), e.waitResult(s.ID, b.EntryID)
	if ra.Text != "first after crash" || rb.Text != "second after crash" {
		t.Fatalf("results after the crash: %+v %+v", ra, rb)
	}
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	turns := strings.Join(started(evs), "|")
	if turns != "user:sleep 60000|queue:echo first after crash|queue:echo second after crash" {
		t.Fatalf("turns: %s", turns)
	}
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.State != berth.StateActive || got.Queue.Pending != 0 {
		t.Fatalf("session after the crash: %s %+v", got.State, got.Queue)
	}
}

func TestDroppingAnEntryOfAStoppedSessionKeepsItsLogClosed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.startBusy(s.ID, "sleep 60000")
	q := e.promptOK(s.ID, "echo later", "")
	e.promptOK(s.ID, "echo later still", "")
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.m.CancelQueueEntry(ctx, s.ID, q.EntryID); err != nil {
		t.Fatal(err)
	}
	evs := e.events(s.ID)
	if last := evs[len(evs)-1]; last.Type != berth.EventSessionStopped {
		t.Fatalf("the log goes on after session_stopped: %v", types(evs[len(evs)-3:]))
	}
	got, _ := e.m.GetSession(ctx, s.ID)
	if got.Queue.Pending != 1 {
		t.Fatalf("stored queue count = %d, want 1", got.Queue.Pending)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := e.m.StreamEvents(sctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		if _, err := st.Next(sctx); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the stream of a stopped session did not end: %v", err)
			}
			break
		}
	}
	// The one left runs after a resume.
	if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the last entry to run", func() bool {
		return strings.Join(started(e.events(s.ID)), "|") == "user:sleep 60000|queue:echo later still"
	})
}
