package berth

import "time"

// Kinds of input entry.
const (
	// EntryQueue is a prompt that runs as its own turn after the turns
	// before it.
	EntryQueue = "queue"
	// EntrySteer is a text staged for the turn in flight; a session holds at
	// most one pending steer.
	EntrySteer = "steer"
)

// States of an input entry. An entry leaves pending exactly once.
const (
	EntryPending    = "pending"
	EntryDispatched = "dispatched"
	EntryCanceled   = "canceled"
)

// QueueEntry is one prompt a session accepted while it was busy, kept in
// the store until it runs or is canceled, so a daemon restart loses none.
type QueueEntry struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Kind      string `json:"kind"`
	Text      string `json:"text"`
	// Content is the prompt's blocks (resolved: a file block is the
	// resource berth read) when it was sent as content; Text is then the
	// text of its text blocks.
	Content []ContentBlock `json:"content,omitempty"`
	// Generation is the session's input generation when the entry was
	// accepted; an interrupt moves the session on and older entries never run.
	Generation int64  `json:"generation"`
	State      string `json:"state"`
	// Position is the entry's 1-based place among the session's pending
	// entries of its kind; the store computes it when it lists them.
	Position  int       `json:"position,omitempty"`
	TurnID    string    `json:"turn_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// EnqueueResult is what the store says of an entry it accepted.
type EnqueueResult struct {
	// Position is the entry's 1-based place among pending entries of its kind.
	Position int
	// Replaced is the id of the pending steer the new steer replaced.
	Replaced string
}

// Sources of a turn (the data.source of turn_started).
const (
	SourceUser  = "user"
	SourceQueue = "queue"
	SourceSteer = "steer"
)

// QueueView is the answer of GET /v1/sessions/{id}/queue.
type QueueView struct {
	Entries    []*QueueEntry `json:"entries"`
	Generation int64         `json:"generation"`
}
