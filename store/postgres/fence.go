package postgres

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/jackc/pgx/v5"
)

var _ berth.Fencer = (*Store)(nil)

// fence is what a store opened by a cluster node knows of the leases it
// holds: the node, its incarnation and the token of every lease this
// store instance acquired. Its zero value fences nothing.
type fence struct {
	mu     sync.Mutex
	node   string
	inc    int64            // the node's incarnation at its last RegisterNode; 0 before
	tokens map[string]int64 // session id → token
}

// Fence makes every later write naming a session (AppendEvents,
// UpdateSession, the queue, permission and elicitation writes) check, in
// its own transaction, that the session's lease is held by node with the
// token this store last acquired it with; otherwise it fails with
// ELeaseLost and writes nothing. AcquireLease by node remembers the token,
// ReleaseLease forgets it; a session whose lease this store never took is
// fenced out too. CreateSession, DeleteSession, the lease and node methods
// and the hook outbox are not fenced. Call it once, before anything
// else; calling it again for the same node changes nothing, and
// Fence("") turns fencing off.
func (s *Store) Fence(node string) {
	f := &s.fence
	f.mu.Lock()
	defer f.mu.Unlock()
	if node != f.node || f.tokens == nil {
		f.node, f.inc, f.tokens = node, 0, map[string]int64{}
	}
}

// on reports whether writes are fenced, and for which node.
func (f *fence) on() (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node, f.node != ""
}

// acquired remembers the token of a lease owner took, when owner is the
// fenced node.
func (f *fence) acquired(sessionID, owner string, token int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.node != "" && owner == f.node {
		f.tokens[sessionID] = token
	}
}

// forget drops the token of a session.
func (f *fence) forget(sessionID, owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.node != "" && owner == f.node {
		delete(f.tokens, sessionID)
	}
}

// dropped forgets the token of a deleted session.
func (f *fence) dropped(sessionID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, sessionID)
}

// forgetAll drops every token when node is the fenced node: it lost or
// gave up all its leases.
func (f *fence) forgetAll(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.node != "" && node == f.node {
		clear(f.tokens)
	}
}

// registered notes the incarnation node registered as; a new one holds
// none of the old one's leases.
func (f *fence) registered(node string, inc int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.node == "" || node != f.node {
		return
	}
	if f.inc != 0 && f.inc != inc {
		clear(f.tokens)
	}
	f.inc = inc
}

// token returns the remembered token of a session.
func (f *fence) token(sessionID string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[sessionID]
	return t, ok
}

// fenceSQL reads and share-locks the lease rows of sessions ($1), in key
// order: FOR SHARE waits for a takeover in flight and holds the next one
// off until this transaction ends, and the order is the one every
// statement that locks several leases uses.
const fenceSQL = `SELECT s.id, l.owner, l.token FROM leases l JOIN sessions s ON s.pk = l.session_pk
WHERE s.id = ANY($1) ORDER BY l.session_pk FOR SHARE OF l`

// leaseRow is one row of fenceSQL.
type leaseRow struct {
	id    string
	owner string
	token int64
}

// fenceRows reads the rows of fenceSQL.
func fenceRows(rows pgx.Rows) ([]leaseRow, error) {
	defer rows.Close()
	var out []leaseRow
	for rows.Next() {
		var r leaseRow
		if err := rows.Scan(&r.id, &r.owner, &r.token); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// verdict compares the locked lease rows of ids with the remembered tokens
// of node: ELeaseLost naming every session fenced out, or nil.
func (s *Store) verdict(node string, ids []string, rows []leaseRow) error {
	held := map[string]bool{}
	for _, r := range rows {
		if t, ok := s.fence.token(r.id); ok && r.owner == node && r.token == t {
			held[r.id] = true
		}
	}
	var out []string
	for _, id := range ids {
		if !held[id] {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, cmp.Compare)
	msg := "node " + node + " does not hold the lease of session " + out[0]
	if len(out) > 1 {
		msg = "node " + node + " does not hold the leases of " + out[0] + " and other sessions"
	}
	return &berth.Error{Code: berth.ELeaseLost, Message: msg,
		Details: map[string]any{"node": node, "sessions": out}}
}

// checkFence, when the store is fenced, locks the lease of a session in tx
// and fails with ELeaseLost unless this node holds it with the remembered
// token. A session that does not exist is ENotFound, as the write would
// have said.
func (s *Store) checkFence(ctx context.Context, tx pgx.Tx, sessionID string) error {
	node, ok := s.fence.on()
	if !ok {
		return nil
	}
	rows, err := tx.Query(ctx, fenceSQL, []string{sessionID})
	if err != nil {
		return internal(err, "check lease")
	}
	got, err := fenceRows(rows)
	if err != nil {
		return internal(err, "check lease")
	}
	verr := s.verdict(node, []string{sessionID}, got)
	if verr == nil || len(got) > 0 {
		return verr
	}
	// No lease row: tell a missing session apart.
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1`, sessionID).Scan(&one)
	if err == pgx.ErrNoRows {
		return berth.Errorf(berth.ENotFound, "session %s not found", sessionID)
	}
	if err != nil {
		return internal(err, "check lease")
	}
	return verr
}
