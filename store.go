package berth

import (
	"context"
	"time"
)

// Store keeps sessions and their event logs. It is the truth for state:
// every state transition is written before it is reported. Implementations
// are safe for concurrent use. Each method documents the codes of the
// errors it returns; any other error is EInternal.
//
// It is the sum of one small interface per entity, so that a consumer
// needing one part (the event log writer, the queue) can say so.
// Optional capabilities (HookStore, SessionCounter, NodeStore, Fencer,
// EventWatcher) are found by type assertion.
type Store interface {
	SessionStore
	EventStore
	QueueStore
	PermissionStore
	ElicitationStore
	LeaseStore
	RecoveryStore
	// CredentialStore is in every Store (not found by assertion): the
	// daemon's credentials live where its sessions do, and a store that
	// cannot keep them safely says so at each call (EUnavailable).
	CredentialStore
	UsageStore
	// SignInStore is in every Store: a browser sign-in lives where the
	// sessions do, so a restart or another node finds it.
	SignInStore

	// Name says which backend this is ("sqlite", "postgres", "memory"), for health.
	Name() string
	// Close flushes and releases the store.
	Close() error
}

// SessionStore keeps the session records.
type SessionStore interface {
	// CreateSession inserts a new session. EConflict if the id exists.
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns one session. ENotFound if there is none.
	GetSession(ctx context.Context, id string) (*Session, error)
	// ListSessions returns a page of sessions, newest first, that match f.
	// EInvalid for a malformed cursor.
	ListSessions(ctx context.Context, f SessionFilter) (*SessionPage, error)
	// UpdateSession writes every field of s except LastSeq and
	// AgentOffset, which only AppendEvents moves, and Usage, which only
	// AddUsage moves. When from is not empty the stored state must equal
	// from, else EConflict (the transition guard). ENotFound if s is absent.
	UpdateSession(ctx context.Context, s *Session, from State) error
	// DeleteSession removes a session, its whole log, its queue entries,
	// permissions and lease. ENotFound if absent.
	DeleteSession(ctx context.Context, id string) error
	// SetStorageSynced records that the object store has the session as
	// of event seq, written at at (Session.Storage): it moves forward
	// only, a seq at or below the stored one changing nothing.
	// ENotFound if the session is absent.
	SetStorageSynced(ctx context.Context, id string, seq int64, at time.Time) error
}

// EventStore keeps each session's append-only event log.
type EventStore interface {
	// AppendEvents writes sequenced events of any number of sessions in one
	// transaction and moves each session's LastSeq to its highest seq and
	// its AgentOffset to the highest Event.Source (never back). All or
	// nothing. EConflict if a (session, seq) already exists.
	AppendEvents(ctx context.Context, events []Event) error
	// ListEvents returns events of a session with seq > f.After in seq
	// order, at most f.Limit (bounded by MaxEventLimit), filtered by type
	// and turn. It answers from an index, never by scanning the log.
	ListEvents(ctx context.Context, sessionID string, f EventFilter) ([]Event, error)
	// LastSeq returns the highest committed seq of a session (0 if none).
	// ENotFound if the session is absent.
	LastSeq(ctx context.Context, sessionID string) (int64, error)
}

// QueueStore keeps each session's prompt queue.
type QueueStore interface {
	// EnqueuePrompt stores a pending entry (e.State is set to pending) and
	// says where it stands. A queue entry is refused with EQueueFull when the
	// session already holds maxPending pending queue entries (nothing is
	// stored). A steer entry replaces the session's pending steer, which
	// becomes canceled in the same transaction. ENotFound if the session is
	// absent, EConflict if the id exists.
	EnqueuePrompt(ctx context.Context, e *QueueEntry, maxPending int) (EnqueueResult, error)
	// ListQueue returns a session's pending entries, oldest first, each
	// with its Position. ENotFound if the session is absent.
	ListQueue(ctx context.Context, sessionID string) ([]*QueueEntry, error)
	// ClaimQueueEntry atomically moves the oldest pending entry of kind and
	// generation to dispatched, records turnID on it and returns it.
	// ENotFound when there is none: an entry is claimed at most once.
	ClaimQueueEntry(ctx context.Context, sessionID, kind string, generation int64, turnID string) (*QueueEntry, error)
	// CancelQueueEntry moves one pending entry to canceled. ENotFound if the
	// session has no pending entry with that id.
	CancelQueueEntry(ctx context.Context, sessionID, entryID string) (*QueueEntry, error)
	// CancelQueue moves every pending entry of the session older than
	// generation (all of them when generation is 0) to canceled and returns
	// them oldest first.
	CancelQueue(ctx context.Context, sessionID string, generation int64) ([]*QueueEntry, error)
}

// PermissionStore keeps the permission requests of agents.
type PermissionStore interface {
	// CreatePermission stores a permission request. ENotFound if the
	// session is absent, EConflict if the id exists.
	CreatePermission(ctx context.Context, p *Permission) error
	// GetPermission returns one permission of a session. ENotFound if absent.
	GetPermission(ctx context.Context, sessionID, id string) (*Permission, error)
	// ListPermissions returns a session's permissions in the given state
	// (all when state is empty), oldest first. ENotFound if the session is
	// absent.
	ListPermissions(ctx context.Context, sessionID, state string) ([]*Permission, error)
	// DecidePermission records p's State, OptionID, DecidedBy and DecidedAt
	// on a pending permission. EConflict if it is no longer pending,
	// ENotFound if absent.
	DecidePermission(ctx context.Context, p *Permission) error
}

// ElicitationStore keeps the elicitations (questions to the user) of agents.
type ElicitationStore interface {
	// CreateElicitation stores an elicitation (pending when e.State is
	// empty, which it then sets). ENotFound if the session is absent,
	// EConflict if the id exists.
	CreateElicitation(ctx context.Context, e *Elicitation) error
	// GetElicitation returns one elicitation of a session. ENotFound if absent.
	GetElicitation(ctx context.Context, sessionID, id string) (*Elicitation, error)
	// ListElicitations returns a session's elicitations in the given state
	// (all when state is empty), oldest first. ENotFound if the session is
	// absent.
	ListElicitations(ctx context.Context, sessionID, state string) ([]*Elicitation, error)
	// ResolveElicitation records e's State, Action, Content, DecidedBy and
	// ResolvedAt on a pending elicitation. EConflict if it is no longer
	// pending, ENotFound if absent.
	ResolveElicitation(ctx context.Context, e *Elicitation) error
}

// LeaseStore keeps each session's lease: which node drives it, with a
// fencing token that only grows.
type LeaseStore interface {
	// AcquireLease takes or renews the lease of a session for owner until
	// now+ttl. A lease held by another owner and not expired at now is
	// EConflict; taking one over (or taking the first) grows Token, renewing
	// one's own keeps it. ENotFound if the session is absent.
	AcquireLease(ctx context.Context, sessionID, owner string, now time.Time, ttl time.Duration) (*Lease, error)
	// GetLease returns the lease of a session. ENotFound if it has none.
	GetLease(ctx context.Context, sessionID string) (*Lease, error)
	// ReleaseLease gives up a lease owner holds with token. EConflict if the
	// lease is held by another owner or token is stale; ENotFound if none.
	ReleaseLease(ctx context.Context, sessionID, owner string, token int64) error
}

// RecoveryStore reads what a booting daemon needs to carry sessions on.
type RecoveryStore interface {
	// ListRecovery reads, for each of the sessions named, what a booting
	// daemon needs to carry it on (see Recovery), for all of them at once
	// rather than a few queries per session. Sessions that do not exist are
	// absent from the map.
	ListRecovery(ctx context.Context, sessionIDs []string) (map[string]*Recovery, error)
	// ListLive lists every session whose state is starting, active or
	// stopping, in no particular order, each by what a booting daemon
	// sorts it by (LiveSession), without decoding its document: the read
	// that stands between a restarted daemon and its API.
	ListLive(ctx context.Context) ([]LiveSession, error)
}

// LiveSession is a session stored as live (starting, active or
// stopping): what a booting daemon needs to tell one whose agent may run
// on in its shim from one that lost its agent.
type LiveSession struct {
	ID         string
	State      State
	ShimSocket string
}

// Recovery is what a booting daemon reads of a session it reattaches.
type Recovery struct {
	// Session is the session as stored, as GetSession gives it.
	Session *Session
	// OpenTurn is the session's last turn_started event when no
	// turn_ended of that turn follows it; nil when no turn is open.
	OpenTurn *Event
	// Queue holds the session's pending entries, oldest first, each with
	// its Position, as ListQueue gives them.
	Queue []*QueueEntry
	// Pending holds the session's pending permissions, oldest first.
	Pending []*Permission
	// Elicitations holds the session's pending elicitations, oldest
	// first, as ListElicitations of ElicitationPending gives them.
	Elicitations []*Elicitation
}

// SessionCounter is a Store that counts its sessions without reading
// them whole, for metrics at scrape time. It is optional: without it the
// sessions are listed.
type SessionCounter interface {
	// CountSessions counts the sessions whose ids are not in exclude,
	// each by its Session.Tally: one SessionCount per distinct tally.
	CountSessions(ctx context.Context, exclude []string) ([]SessionCount, error)
}
