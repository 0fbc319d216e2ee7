package berth

import (
	"context"
	"time"
)

// HookDelivery is one event (or badge change) to be delivered to one hook,
// kept in the store's outbox until it is delivered or given up (docs/api.md,
// "Hooks"). Body is fixed when the delivery is enqueued, so every retry sends
// the same bytes under the same ID.
type HookDelivery struct {
	ID string `json:"id"`
	// Hook is the hook's name; HookIndex its place among [[hooks]] when
	// the delivery was made.
	Hook      string `json:"hook"`
	HookIndex int    `json:"hook_index"`
	// Event is the event type, or "badge:<badge>" for a badge change.
	Event     string `json:"event"`
	SessionID string `json:"session_id"`
	// Seq is the event's seq (for a badge change, the session's last seq
	// when it changed).
	Seq           int64      `json:"seq"`
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`

	// Body is the JSON sent to the hook.
	Body []byte `json:"-"`
	// Ord is the store's arrival order of the delivery.
	Ord int64 `json:"-"`
}

// Hook delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// HookDeliveryFilter selects a page of deliveries, newest first.
type HookDeliveryFilter struct {
	// State is one of the Delivery* states; "" for all.
	State string
	// SessionID, when set, keeps one session's deliveries.
	SessionID string
	// Limit bounds the page (default DefaultEventLimit, at most
	// MaxEventLimit); Cursor is a NextCursor of an earlier page.
	Limit  int
	Cursor string
}

// HookDeliveryPage is one page of deliveries.
type HookDeliveryPage struct {
	Deliveries []*HookDelivery `json:"deliveries"`
	NextCursor string          `json:"next_cursor"`
}

// HookCursor is how far the hooks have looked at one session: every event
// with a seq up to Seq has had its deliveries enqueued, and Badge is the
// last badge seen.
type HookCursor struct {
	Seq   int64
	Badge Badge
}

// BadgeUnknown is a hook cursor's badge before the hooks saw the session:
// its first badge is recorded, not reported as a change.
const BadgeUnknown Badge = "?"

// HookStore is the hooks' durable outbox, an optional capability of a
// Store (found by type assertion). Every method's errors are EInternal
// unless said otherwise.
type HookStore interface {
	// InitHookCursors, unless it ran since the last ResetHookCursors, sets
	// every session's cursor to its last seq and badge to BadgeUnknown, so
	// hooks begin with what happens from now on; a session without a
	// cursor afterwards is newer and is read from its first event.
	InitHookCursors(ctx context.Context) error
	// ResetHookCursors forgets every cursor (the daemon runs without hooks).
	ResetHookCursors(ctx context.Context) error
	// GetHookCursor returns a session's cursor; ok is false when it has none.
	GetHookCursor(ctx context.Context, sessionID string) (c HookCursor, ok bool, err error)
	// EnqueueHookDeliveries, in one transaction, inserts ds (State pending,
	// skipping any whose hook, session, seq and event are already there)
	// and moves the session's cursor to c.Seq (never back) and, when
	// c.Badge is not empty, its badge to c.Badge. EInvalid for a delivery
	// without an id, hook, session or body.
	EnqueueHookDeliveries(ctx context.Context, sessionID string, c HookCursor, ds []*HookDelivery) error
	// ClaimHookDeliveries claims, for owner until until, at most n pending
	// deliveries of hook that are due at now and are each the oldest
	// pending delivery of their session to that hook, and not claimed by
	// anyone at now. A session's next delivery is never claimed while an
	// older one is pending.
	ClaimHookDeliveries(ctx context.Context, hook, owner string, now, until time.Time, n int) ([]*HookDelivery, error)
	// FinishHookAttempt records d's State, Attempts, LastError,
	// NextAttemptAt and DeliveredAt and drops its claim. ENotFound if the
	// delivery is gone.
	FinishHookAttempt(ctx context.Context, d *HookDelivery) error
	// ReleaseHookClaims drops every claim owner holds (at its start: what
	// it held before a crash is free to be retried at once).
	ReleaseHookClaims(ctx context.Context, owner string) error
	// ListHookDeliveries returns a page of deliveries, newest first.
	// EInvalid for a bad state or cursor.
	ListHookDeliveries(ctx context.Context, f HookDeliveryFilter) (*HookDeliveryPage, error)
	// PruneHookDeliveries deletes delivered deliveries older than
	// deliveredBefore or past the newest keepDelivered, failed ones older
	// than failedBefore, and the cursors of sessions that no longer
	// exist. It returns how many deliveries it deleted.
	PruneHookDeliveries(ctx context.Context, deliveredBefore time.Time, keepDelivered int, failedBefore time.Time) (int64, error)
}

// HookInfo describes one configured hook, as the API shows it: never its
// secret, and neither a URL's path and query nor a command's arguments,
// which often carry a token of their own.
type HookInfo struct {
	Name   string            `json:"name"`
	Index  int               `json:"index"`
	Events []string          `json:"events"`
	Agent  string            `json:"agent,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Kind is "url" or "command".
	Kind string `json:"kind"`
	// Target is the URL's scheme and host, or the command's name.
	Target    string `json:"target"`
	Signed    bool   `json:"signed"`
	TimeoutMS int64  `json:"timeout_ms"`
}

// HookService is what the API offers about hooks.
type HookService interface {
	// Hooks lists the configured hooks.
	Hooks() []HookInfo
	// ListDeliveries pages the outbox. EInvalid for a bad filter.
	ListDeliveries(ctx context.Context, f HookDeliveryFilter) (*HookDeliveryPage, error)
}
