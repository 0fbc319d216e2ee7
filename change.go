package berth

import (
	"context"
	"encoding/json"
)

// The event types of the all-sessions stream, GET /v1/events/stream
// (docs/api.md, "All-sessions stream").
const (
	// ChangeSessionCreated: a session was stored; data is its Session JSON.
	ChangeSessionCreated = "session_created"
	// ChangeSessionUpdated: something a list shows changed (state, badge,
	// name, labels, pending permissions, queue, last activity); data is the
	// whole Session JSON as it is now.
	ChangeSessionUpdated = "session_updated"
	// ChangeSessionDeleted: the session is gone; data is its last Session
	// JSON.
	ChangeSessionDeleted = "session_deleted"
	// ChangeResync: the stream cannot resume where the client asked (a
	// daemon restart, or the client fell behind what is kept); the client
	// lists the sessions again, then follows. Data is a Resync.
	ChangeResync = "resync"
)

// Resync reasons.
const (
	// ResyncRestart: the Last-Event-ID is from another daemon (a restart).
	ResyncRestart = "restart"
	// ResyncTooOld: the changes after the Last-Event-ID are no longer kept.
	ResyncTooOld = "too_old"
	// ResyncLagged: the reader fell behind the changes kept while it was
	// connected.
	ResyncLagged = "lagged"
)

// SessionChange is one event of the all-sessions stream.
type SessionChange struct {
	// ID is the stream position: "<epoch>-<seq>", epoch naming the daemon
	// process and seq a daemon-wide sequence. Clients treat it as opaque
	// and send it back as Last-Event-ID.
	ID string `json:"id"`
	// Type is one of the Change* constants.
	Type string `json:"type"`
	// Data is the Session JSON, or a Resync for ChangeResync. It is shared
	// between readers: never modify it.
	Data json.RawMessage `json:"data"`
}

// Resync is the data of a resync event.
type Resync struct {
	// Reason is one of the Resync* constants.
	Reason string `json:"reason"`
	// Message says what the client must do.
	Message string `json:"message"`
}

// ChangeStream reads the all-sessions stream from a position on, with no
// gap and no duplicate while the position is kept; otherwise its first
// event is a resync.
type ChangeStream interface {
	// Next blocks until at least one change after the stream's position is
	// published and returns those changes (at most a page), or ctx.Err()
	// when ctx ends first.
	Next(ctx context.Context) ([]SessionChange, error)
	// Close releases the stream.
	Close()
}
