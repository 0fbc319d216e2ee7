package berth

import (
	"context"
	"encoding/json"
	"time"
)

// Event is one record of a session's append-only log. Seq starts at 1 and
// grows by exactly 1 per session; it is assigned by the log writer, never by
// the producer.
type Event struct {
	Seq       int64           `json:"seq"`
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id,omitempty"`
	Type      string          `json:"type"`
	Time      time.Time       `json:"time"`
	Data      json.RawMessage `json:"data"`
	// Source is the byte offset in the agent's stdout stream just past the
	// line this event came from, 0 when the event did not come from an agent
	// line. It is not stored per event, only as the session's high-water
	// mark (Session.AgentOffset), committed with the events.
	Source int64 `json:"-"`
}

// Turn stop reasons (the data.stop_reason of turn_ended).
const (
	TurnEndTurn         = "end_turn"
	TurnCancelled       = "cancelled"
	TurnMaxTokens       = "max_tokens"
	TurnMaxTurnRequests = "max_turn_requests"
	TurnRefusal         = "refusal"
	TurnError           = "error"
)

// EventFilter selects a page of a session's log. After is exclusive.
type EventFilter struct {
	After  int64
	Limit  int
	Type   string
	TurnID string
	// MaxBytes, when set, also ends the page at the event whose data
	// brings the page's to MaxBytes or more (one event is always
	// returned): a page shorter than Limit is then not the log's end, an
	// empty one is.
	MaxBytes int
}

// EventPageBytes bounds the data of a page of events read for a client
// or a stream: an agent's output is tens of MB a turn at most, and a
// thousand of its events must not be held at once.
const EventPageBytes = 8 << 20

// Paging bounds for event pages (docs/api.md, "Events").
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 1000
)

// NewEvent builds an unsequenced event whose data is v marshalled to JSON.
// It panics only if v cannot be marshalled, which is a programming error.
func NewEvent(sessionID, turnID, typ string, v any) Event {
	var data json.RawMessage
	switch d := v.(type) {
	case nil:
		data = json.RawMessage(`{}`)
	case json.RawMessage:
		data = d
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic("berth: event data: " + err.Error())
		}
		data = b
	}
	return Event{SessionID: sessionID, TurnID: turnID, Type: typ, Time: time.Now().UTC(), Data: data}
}

// EventStream reads a session's log from a position on: first what is
// stored, then what is appended, in seq order, with no gap and no duplicate.
type EventStream interface {
	// Next blocks until at least one event after the stream's position is
	// committed, and returns those events (at most a page). It returns
	// io.EOF once the session is stopped and every event has been returned,
	// and ctx.Err() when ctx ends first.
	Next(ctx context.Context) ([]Event, error)
	// Close releases the stream.
	Close()
}
