package acp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// elicitor is a client handler that also serves elicitations.
type elicitor struct {
	updates
	got []CreateElicitationRequest
}

func (e *elicitor) CreateElicitation(ctx context.Context, req CreateElicitationRequest) (CreateElicitationResponse, error) {
	e.mu.Lock()
	e.got = append(e.got, req)
	e.mu.Unlock()
	return CreateElicitationResponse{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
}

// elicitation/create reaches a handler that serves it, in either mode; a
// handler without it answers method not found.
func TestClientServesElicitations(t *testing.T) {
	h := &elicitor{}
	_, p := newPair(t, clientDispatch{h}, Options{})
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"sessionId":"s","mode":"form","message":"Name?","requestedSchema":{"type":"object","properties":{"answer":{"type":"string"}}}}}`)
	if m := p.readMsg(t); string(m.Result) != `{"action":"accept","content":{"answer":"yes"}}` {
		t.Fatalf("form answer = %s (err %v)", m.Result, m.Error)
	}
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{"mode":"url","message":"Sign in","elicitationId":"e1","url":"https://example.com/x"}}`)
	if m := p.readMsg(t); m.Error != nil {
		t.Fatalf("url answer error %v", m.Error)
	}
	h.mu.Lock()
	got := h.got
	h.mu.Unlock()
	if len(got) != 2 || got[0].Mode != "form" || got[0].Message != "Name?" || !strings.Contains(string(got[0].RequestedSchema), `"answer"`) ||
		got[1].Mode != "url" || got[1].URL != "https://example.com/x" || got[1].ElicitationID != "e1" {
		t.Fatalf("requests = %+v", got)
	}

	plain := &updates{}
	_, q := newPair(t, clientDispatch{plain}, Options{})
	q.send(t, `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"mode":"form","message":"?"}}`)
	if m := q.readMsg(t); m.Error == nil || m.Error.Code != CodeMethodNotFound {
		t.Fatalf("without a handler = %+v", m)
	}
}

// berth says in initialize that it serves both elicitation modes.
func TestInitializeAdvertisesElicitation(t *testing.T) {
	h := &updates{}
	conn, p := newPair(t, clientDispatch{h}, Options{})
	c := &Client{conn: conn, h: h}
	done := make(chan error, 1)
	go func() {
		_, err := c.Initialize(context.Background(), Implementation{Name: "berth", Version: "test"})
		done <- err
	}()
	m := p.readMsg(t)
	var params struct {
		ClientCapabilities map[string]json.RawMessage `json:"clientCapabilities"`
	}
	if err := json.Unmarshal(m.Params, &params); err != nil || string(params.ClientCapabilities["elicitation"]) != `{"form":{},"url":{}}` {
		t.Fatalf("initialize params %s, %v", m.Params, err)
	}
	p.send(t, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":1}}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
