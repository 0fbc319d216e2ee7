// Package fence is the bookkeeping of a store opened by a cluster node
// (berth.Fencer): the node, its incarnation and the token of every lease
// the store instance acquired, and the verdict on a write. The backends
// share it; each checks the lease rows in its own transaction.
package fence

import (
	"slices"
	"sync"

	"github.com/berth-sh/berth"
)

// Book remembers the leases one store instance holds for its node. Its
// zero value fences nothing. It is safe for concurrent use.
type Book struct {
	mu     sync.Mutex
	node   string
	inc    int64            // the node's incarnation at its last registration; 0 before
	tokens map[string]int64 // session id → token
}

// Fence starts fencing for node; again for the same node it changes
// nothing, and "" stops fencing.
func (b *Book) Fence(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if node != b.node || b.tokens == nil {
		b.node, b.inc, b.tokens = node, 0, map[string]int64{}
	}
}

// Node returns the fenced node; ok is false when nothing is fenced.
func (b *Book) Node() (node string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.node, b.node != ""
}

// Acquired remembers the token of a lease owner took, when owner is the
// fenced node.
func (b *Book) Acquired(sessionID, owner string, token int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node != "" && owner == b.node {
		b.tokens[sessionID] = token
	}
}

// Released forgets the token of a session owner gave up (or found it no
// longer held), when owner is the fenced node.
func (b *Book) Released(sessionID, owner string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node != "" && owner == b.node {
		delete(b.tokens, sessionID)
	}
}

// Dropped forgets the token of a deleted session.
func (b *Book) Dropped(sessionID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.tokens, sessionID)
}

// Lost forgets every token when node is the fenced node: it was marked
// lost, or left, and holds no lease any more.
func (b *Book) Lost(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node != "" && node == b.node {
		clear(b.tokens)
	}
}

// Registered notes the incarnation node registered as: a new incarnation
// holds none of the old one's leases, so every token is forgotten.
func (b *Book) Registered(node string, inc int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.node == "" || node != b.node {
		return
	}
	if b.inc != 0 && b.inc != inc {
		clear(b.tokens)
	}
	b.inc = inc
}

// Check is the verdict on a write of sessions ids by the fenced node,
// given lease, which reads the (locked) lease of a session: nil when the
// node holds every one with the token remembered, else ELeaseLost whose
// details list every session fenced out ("sessions", sorted) and the node.
// A session with no lease, or none remembered, is fenced out. Nothing is
// checked when nothing is fenced.
func (b *Book) Check(ids []string, lease func(id string) (owner string, token int64, ok bool)) error {
	b.mu.Lock()
	node := b.node
	var out []string
	for _, id := range ids {
		if node == "" {
			break
		}
		want, remembered := b.tokens[id]
		owner, token, ok := lease(id)
		if !remembered || !ok || owner != node || token != want {
			out = append(out, id)
		}
	}
	b.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	out = slices.Compact(out)
	msg := "node " + node + " does not hold the lease of session " + out[0]
	if len(out) > 1 {
		msg = "node " + node + " does not hold the leases of session " + out[0] + " and others"
	}
	return &berth.Error{Code: berth.ELeaseLost, Message: msg,
		Details: map[string]any{"node": node, "sessions": out}}
}
