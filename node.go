package berth

import (
	"context"
	"time"
)

// NodeState says whether a node of a cluster is heartbeating.
type NodeState string

// Node states. A node is up while it heartbeats; lost once it has not for
// the lease TTL (another node marked it); left when it stopped cleanly.
const (
	NodeUp   NodeState = "up"
	NodeLost NodeState = "lost"
	NodeLeft NodeState = "left"
)

// Node is one `berth serve` sharing a store with others (docs/api.md,
// "Nodes").
type Node struct {
	ID string `json:"id"`
	// Advertise is the base URL other nodes forward writes to.
	Advertise     string    `json:"advertise"`
	State         NodeState `json:"state"`
	StartedAt     time.Time `json:"started_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Sessions counts the live leases the node holds (filled by ListNodes).
	Sessions int `json:"sessions"`
}

// NodeStore is the node registry of a store several daemons share. It is
// an optional capability of a Store: a store without it has one node.
type NodeStore interface {
	// RegisterNode inserts n or, when its id exists, marks it up again with
	// n's Advertise and StartedAt and a heartbeat at now. It is how a node
	// (re)joins. A node still up (a restart within the TTL) keeps its
	// leases; a node that was lost or left comes back as a new
	// incarnation and holds none of the leases it had: they stay its
	// (LeasesOf lists them, expired, for a takeover) but its heartbeats no
	// longer renew them, and a fenced store forgets their tokens. Register
	// before acquiring leases.
	RegisterNode(ctx context.Context, n *Node, now time.Time) error
	// Heartbeat records that node id is alive at now and renews, in the
	// same transaction, every lease its current incarnation holds until
	// now+ttl. ENodeLost when the node is marked lost (or left): it must
	// stop driving every session at once, without writing (a fenced store
	// forgets every token, so its writes fail). ENotFound if the node is
	// absent.
	Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error
	// ListNodes returns every node, oldest first, with Sessions counted.
	ListNodes(ctx context.Context) ([]*Node, error)
	// MarkLostNodes marks lost every up node whose last heartbeat is older
	// than now-ttl and returns them. Each node is returned to exactly one
	// caller, however many call at once.
	MarkLostNodes(ctx context.Context, now time.Time, ttl time.Duration) ([]*Node, error)
	// LeaveNode marks node id left and releases its leases (a clean stop).
	// Leaving twice is no error; ENodeLost if the node is lost (its leases
	// belong to the takeover); ENotFound if it is absent.
	LeaveNode(ctx context.Context, id string) error
	// LeasesOf returns the live (owner not empty) leases node id holds,
	// expired or not, by session id.
	LeasesOf(ctx context.Context, owner string) ([]*Lease, error)
}

// Fencer is a store that refuses writes of a node that lost a session's
// lease. Once Fence is called, AppendEvents and UpdateSession of a
// session (and CreatePermission, EnqueuePrompt, …: every write naming a
// session) succeed only while the store's lease of that session is held
// by node with the token this store instance last acquired (or renewed)
// it with; otherwise they fail with ELeaseLost and write nothing. Without
// Fence (one node) nothing is checked.
type Fencer interface {
	Fence(node string)
}

// EventWatcher wakes a node's readers when another node commits events
// (PostgreSQL LISTEN/NOTIFY). The log stays the truth: a notice only says
// "read the store again".
type EventWatcher interface {
	// WatchEvents calls fn(sessionID, lastSeq) for every commit of events
	// by any node (this one included) until ctx ends. After a lost
	// connection it reconnects and calls fn("", 0) once: "anything may have
	// changed". It returns ctx's error.
	WatchEvents(ctx context.Context, fn func(sessionID string, lastSeq int64)) error
}
