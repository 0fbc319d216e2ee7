package session

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-sh/berth/session/live"

	"github.com/berth-sh/berth"
)

func TestClearStartsANewConversation(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Limits.CancelGrace = time.Hour })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "echo one")
	old := s.ACP.SessionID
	busy, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "sleep 60000"})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "echo queued"})
	if err != nil || queued.Status != "queued" {
		t.Fatalf("queue: %+v, %v", queued, err)
	}
	if _, err := e.m.ClearSession(ctx, s.ID, false); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("clear during a turn = %v, want conflict", err)
	}
	got, err := e.m.ClearSession(ctx, s.ID, true)
	if err != nil || got.ACP.SessionID == "" || got.ACP.SessionID == old || got.State != berth.StateActive || got.Queue.Pending != 0 {
		t.Fatalf("clear = %+v, %v; want a new conversation, nothing pending", got, err)
	}
	if r, err := e.m.WaitTurn(ctx, s.ID, busy.TurnID); err != nil || r.StopReason != berth.TurnCancelled {
		t.Fatalf("turn in flight: %+v, %v", r, err)
	}
	evs := e.events(s.ID)
	cleared := ofType(evs, berth.EventConversationCleared)
	if len(cleared) != 1 {
		t.Fatalf("log = %v", types(evs))
	}
	var d live.ClearedData
	if err := json.Unmarshal(cleared[0].Data, &d); err != nil || d.OldACPSessionID != old || d.ACPSessionID != got.ACP.SessionID || d.CanceledEntries != 1 {
		t.Fatalf("conversation_cleared = %s", cleared[0].Data)
	}
	var canceled bool
	for _, ev := range ofType(evs, berth.EventPromptCanceled) {
		var c live.EntryData
		_ = json.Unmarshal(ev.Data, &c)
		canceled = canceled || (c.EntryID == queued.EntryID && c.Reason == live.CancelCleared)
	}
	if !canceled {
		t.Errorf("no prompt_canceled for %s in %v", queued.EntryID, types(evs))
	}
	if r := e.prompt(s.ID, "echo two"); r.Text != "two" {
		t.Fatalf("turn after clear = %+v", r)
	}
	// Resume loads the new conversation, not the old one.
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	back, err := e.m.ResumeSession(ctx, s.ID)
	if err != nil || back.ACP.SessionID != got.ACP.SessionID {
		t.Fatalf("resume = %+v, %v; want conversation %s", back, err, got.ACP.SessionID)
	}
	started := ofType(e.events(s.ID), berth.EventSessionStarted)
	var st struct {
		ResumedBy string `json:"resumed_by"`
	}
	if err := json.Unmarshal(started[len(started)-1].Data, &st); err != nil || st.ResumedBy != "load" {
		t.Fatalf("session_started = %s, want resumed_by load", started[len(started)-1].Data)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ClearSession(ctx, s.ID, false); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("clear of a stopped session = %v, want conflict", err)
	}
}
