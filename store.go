package berth

import "context"

// Store keeps sessions and their event logs. It is the truth for state:
// every state transition is written before it is reported. Implementations
// are safe for concurrent use. Each method documents the codes of the
// errors it returns; any other error is EInternal.
type Store interface {
	// CreateSession inserts a new session. EConflict if the id exists.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns one session. ENotFound if there is none.
	GetSession(ctx context.Context, id string) (*Session, error)
	// ListSessions returns a page of sessions, newest first, that match f.
	// EInvalid for a malformed cursor.
	ListSessions(ctx context.Context, f SessionFilter) (*SessionPage, error)
	// UpdateSession writes every field of s except LastSeq, which only
	// AppendEvents moves. When from is not empty the stored state must equal
	// from, else EConflict (the transition guard). ENotFound if s is absent.
	UpdateSession(ctx context.Context, s *Session, from State) error
	// DeleteSession removes a session and its whole log. ENotFound if absent.
	DeleteSession(ctx context.Context, id string) error

	// AppendEvents writes sequenced events of any number of sessions in one
	// transaction and moves each session's LastSeq to its highest seq. All
	// or nothing. EConflict if a (session, seq) already exists.
	AppendEvents(ctx context.Context, events []Event) error
	// ListEvents returns events of a session with seq > f.After in seq
	// order, at most f.Limit (bounded by MaxEventLimit), filtered by type
	// and turn. It answers from an index, never by scanning the log.
	ListEvents(ctx context.Context, sessionID string, f EventFilter) ([]Event, error)
	// LastSeq returns the highest committed seq of a session (0 if none).
	// ENotFound if the session is absent.
	LastSeq(ctx context.Context, sessionID string) (int64, error)

	// Name says which backend this is ("sqlite", "postgres"), for health.
	Name() string
	// Close flushes and releases the store.
	Close() error
}
