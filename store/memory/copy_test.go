package memory

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// What a caller passes in or gets back is its own: changing it afterwards
// changes nothing in the store.
func TestCallersCannotAlias(t *testing.T) {
	ctx := context.Background()
	s := New()
	now := time.Now()
	in := &berth.Session{ID: "a", Agent: "demo", State: berth.StateStarting, CreatedAt: now,
		Labels: map[string]string{"k": "v"}, Env: map[string]string{"E": "1"},
		ACP: berth.ACPInfo{AgentInfo: json.RawMessage(`{"n":1}`)}, Failure: &berth.Failure{Kind: "x"}}
	if err := s.CreateSession(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.Labels["k"], in.Env["E"], in.ACP.AgentInfo[2], in.Failure.Kind = "changed", "changed", 'X', "changed"
	got, err := s.GetSession(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["k"] != "v" || got.Env["E"] != "1" || string(got.ACP.AgentInfo) != `{"n":1}` || got.Failure.Kind != "x" {
		t.Fatalf("the caller's session changed the stored one: %+v", got)
	}
	got.Labels["k"], got.Env["E"] = "changed", "changed"
	if again, _ := s.GetSession(ctx, "a"); again.Labels["k"] != "v" || again.Env["E"] != "1" {
		t.Fatalf("a session read back changed the stored one: %+v", again)
	}
	page, err := s.ListSessions(ctx, berth.SessionFilter{Labels: map[string]string{"k": "v"}})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("label index followed the caller's map: %v %v", page, err)
	}

	data := json.RawMessage(`{"text":"hi"}`)
	if err := s.AppendEvents(ctx, []berth.Event{{SessionID: "a", Seq: 1, Type: berth.EventAgentMessage, Data: data}}); err != nil {
		t.Fatal(err)
	}
	data[2] = 'X'
	evs, err := s.ListEvents(ctx, "a", berth.EventFilter{})
	if err != nil || len(evs) != 1 || string(evs[0].Data) != `{"text":"hi"}` {
		t.Fatalf("events = %v %v", evs, err)
	}
	evs[0].Data[2] = 'X'
	if evs, _ = s.ListEvents(ctx, "a", berth.EventFilter{}); string(evs[0].Data) != `{"text":"hi"}` {
		t.Fatalf("an event read back changed the stored one: %s", evs[0].Data)
	}

	p := &berth.Permission{ID: "p", SessionID: "a", ToolCall: json.RawMessage(`{"t":1}`),
		Options: []berth.PermissionOption{{ID: "o", Kind: "allow_once"}}}
	if err := s.CreatePermission(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.ToolCall[2], p.Options[0].ID = 'X', "changed"
	gp, err := s.GetPermission(ctx, "a", "p")
	if err != nil || string(gp.ToolCall) != `{"t":1}` || gp.Options[0].ID != "o" {
		t.Fatalf("permission = %+v %v", gp, err)
	}
	gp.Options[0].ID = "changed"
	if ps, _ := s.ListPermissions(ctx, "a", ""); ps[0].Options[0].ID != "o" {
		t.Fatalf("a permission read back changed the stored one: %+v", ps[0])
	}

	e := &berth.QueueEntry{ID: "q", SessionID: "a", Kind: berth.EntryQueue, Text: "x"}
	if _, err := s.EnqueuePrompt(ctx, e, 5); err != nil {
		t.Fatal(err)
	}
	e.Text = "changed"
	q, err := s.ListQueue(ctx, "a")
	if err != nil || len(q) != 1 || q[0].Text != "x" {
		t.Fatalf("queue = %+v %v", q, err)
	}
	q[0].Text = "changed"
	if q, _ = s.ListQueue(ctx, "a"); q[0].Text != "x" {
		t.Fatalf("an entry read back changed the stored one: %+v", q[0])
	}

	d := &berth.HookDelivery{ID: "d", Hook: "h", SessionID: "a", Seq: 1, Event: berth.EventTurnEnded, Body: []byte(`{"b":1}`), CreatedAt: now}
	if err := s.EnqueueHookDeliveries(ctx, "a", berth.HookCursor{Seq: 1}, []*berth.HookDelivery{d}); err != nil {
		t.Fatal(err)
	}
	d.Body[2] = 'X'
	page2, err := s.ListHookDeliveries(ctx, berth.HookDeliveryFilter{})
	if err != nil || len(page2.Deliveries) != 1 || string(page2.Deliveries[0].Body) != `{"b":1}` {
		t.Fatalf("deliveries = %+v %v", page2, err)
	}
}
