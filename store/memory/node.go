package memory

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var (
	_ berth.NodeStore = (*Store)(nil)
	_ berth.Fencer    = (*Store)(nil)
)

// node is one registered node. inc is its incarnation: it grows each time
// the node registers after it was lost or left, and a lease records the
// incarnation that took it (as in the SQL stores' migration 0024).
type node struct {
	n   berth.Node
	inc int64
}

// incarnation returns the incarnation of owner, 0 when it is no node.
// s.mu is held.
func (st *state) incarnation(owner string) int64 {
	if n, ok := st.nodes[owner]; ok {
		return n.inc
	}
	return 0
}

// leasesOf counts the leases owner holds. s.mu is held.
func (st *state) leasesOf(owner string) int {
	k := 0
	for _, r := range st.sessions {
		if r.lease != nil && r.lease.Owner == owner {
			k++
		}
	}
	return k
}

// out copies a node with its lease count. s.mu is held.
func (st *state) out(n *node) *berth.Node {
	c := n.n
	c.Sessions = st.leasesOf(c.ID)
	return &c
}

// RegisterNode inserts n or, when its id exists, marks it up again with
// n's Advertise and StartedAt and a heartbeat at now; it sets n.State and
// n.LastHeartbeat. A node registering again while still up is the same
// incarnation and keeps its leases; one that was lost or left is a new
// one, which holds none of the old leases: its heartbeats do not renew
// them, and a fenced store forgets its tokens. EInvalid for an empty id or
// times out of range.
func (s *Store) RegisterNode(ctx context.Context, n *berth.Node, now time.Time) error {
	if n == nil || n.ID == "" {
		return berth.Errorf(berth.EInvalid, "node id must not be empty")
	}
	if _, ok := codec.ToNanos(now); !ok {
		return berth.Errorf(berth.EInvalid, "heartbeat time out of range")
	}
	if err := checkTime(n.StartedAt, "node start time"); err != nil {
		return err
	}
	s.mu.Lock()
	rec, ok := s.nodes[n.ID]
	switch {
	case !ok:
		rec = &node{inc: 1}
		s.nodes[n.ID] = rec
	case rec.n.State != berth.NodeUp:
		rec.inc++
	}
	rec.n = berth.Node{ID: n.ID, Advertise: n.Advertise, State: berth.NodeUp,
		StartedAt: storedTime(n.StartedAt), LastHeartbeat: storedTime(now)}
	inc := rec.inc
	s.mu.Unlock()
	s.fence.Registered(n.ID, inc)
	n.State, n.LastHeartbeat = berth.NodeUp, storedTime(now)
	return nil
}

// Heartbeat records that node id is alive at now (never moving back) and
// renews every lease its current incarnation holds until now+ttl (never
// shortening one). ENodeLost when the node is lost or left: nothing is
// renewed and a fenced store forgets its tokens. ENotFound if the node is
// absent; EInvalid for a ttl that is not positive or times out of range.
func (s *Store) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	_, until, err := codec.HeartbeatTimes(now, ttl)
	if err != nil {
		return err
	}
	s.mu.Lock()
	rec, found := s.nodes[id]
	if !found {
		s.mu.Unlock()
		return berth.Errorf(berth.ENotFound, "node %s not found", id)
	}
	if rec.n.State != berth.NodeUp {
		state := rec.n.State
		s.mu.Unlock()
		s.fence.Lost(id)
		return codec.NodeLost(id, state)
	}
	if now.After(rec.n.LastHeartbeat) {
		rec.n.LastHeartbeat = storedTime(now)
	}
	for _, r := range s.sessions {
		if l := r.lease; l != nil && l.Owner == id && r.leaseInc == rec.inc && l.ExpiresAt.UnixNano() < until {
			c := *l
			c.ExpiresAt = codec.FromNanos(until)
			r.lease = &c
		}
	}
	s.mu.Unlock()
	return nil
}

// ListNodes returns every node, oldest (by start time, then id) first,
// each with the number of leases it holds.
func (s *Store) ListNodes(ctx context.Context) ([]*berth.Node, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*berth.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, s.out(n))
	}
	slices.SortFunc(out, func(a, b *berth.Node) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// MarkLostNodes marks lost every up node whose last heartbeat is before
// now-ttl and returns them, oldest heartbeat first. Under the store's lock,
// each node goes to exactly one caller.
func (s *Store) MarkLostNodes(ctx context.Context, now time.Time, ttl time.Duration) ([]*berth.Node, error) {
	cut := now.Add(-ttl)
	if _, ok := codec.ToNanos(cut); !ok {
		return nil, berth.Errorf(berth.EInvalid, "heartbeat time out of range")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*berth.Node{}
	for _, n := range s.nodes {
		if n.n.State == berth.NodeUp && n.n.LastHeartbeat.Before(cut) {
			n.n.State = berth.NodeLost
			out = append(out, s.out(n))
		}
	}
	slices.SortFunc(out, func(a, b *berth.Node) int {
		return cmp.Or(a.LastHeartbeat.Compare(b.LastHeartbeat), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// LeaveNode marks node id left and releases the leases of its current
// incarnation; a fenced store forgets its tokens. Leaving twice is no
// error. ENodeLost if the node is lost (its leases belong to the
// takeover); ENotFound if it is absent.
func (s *Store) LeaveNode(ctx context.Context, id string) error {
	s.mu.Lock()
	rec, ok := s.nodes[id]
	if !ok {
		s.mu.Unlock()
		return berth.Errorf(berth.ENotFound, "node %s not found", id)
	}
	if left, err := codec.Leaving(id, rec.n.State); left || err != nil {
		s.mu.Unlock()
		return err
	}
	rec.n.State = berth.NodeLeft
	for _, r := range s.sessions {
		if r.lease != nil && r.lease.Owner == id && r.leaseInc == rec.inc {
			r.lease = nil
		}
	}
	s.mu.Unlock()
	s.fence.Lost(id)
	return nil
}

// LeasesOf returns copies of the leases owner holds, expired or not, by
// session id. EInvalid for an empty owner.
func (s *Store) LeasesOf(ctx context.Context, owner string) ([]*berth.Lease, error) {
	if owner == "" {
		return nil, berth.Errorf(berth.EInvalid, "lease owner must not be empty")
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []*berth.Lease{}
	for _, r := range s.sessions {
		if r.lease != nil && r.lease.Owner == owner {
			c := *r.lease
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *berth.Lease) int { return cmp.Compare(a.SessionID, b.SessionID) })
	return out, nil
}

// Fence makes every later write naming a session (AppendEvents,
// UpdateSession, the queue, permission and elicitation writes) of this
// Store value succeed only while the session's lease is held by node with
// the token this value last acquired it with; otherwise it fails with
// ELeaseLost and writes nothing. Two Store values over one state are two
// nodes (see NewPeer). Fence("") turns fencing off.
func (s *Store) Fence(node string) { s.fence.Fence(node) }

// NewPeer returns another Store over the same data, with a fence of its
// own: a second node of a test cluster.
func (s *Store) NewPeer() *Store { return &Store{state: s.state} }

// fenced, when the store is fenced, fails with ELeaseLost unless its node
// holds the lease of every session of ids with the remembered token; a
// session that is absent is ENotFound. s.mu is held.
func (s *Store) fenced(ids ...string) error {
	if _, ok := s.fence.Node(); !ok {
		return nil
	}
	for _, id := range ids {
		if _, err := s.lookup(id); err != nil {
			return err
		}
	}
	return s.fence.Check(ids, func(id string) (string, int64, bool) {
		l := s.sessions[id].lease
		if l == nil {
			return "", 0, false
		}
		return l.Owner, l.Token, true
	})
}
