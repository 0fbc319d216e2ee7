package postgres

import (
	"context"
	"errors"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

var _ berth.Fencer = (*Store)(nil)

// Fence makes every later write naming a session (AppendEvents,
// UpdateSession, the queue, permission and elicitation writes) check, in
// its own transaction, that the session's lease is held by node with the
// token this store instance last acquired it with; otherwise it fails
// with ELeaseLost and writes nothing. AcquireLease by node remembers the
// token, ReleaseLease forgets it; a session whose lease this store never
// took is fenced out too. CreateSession, DeleteSession, the lease and
// node methods and the hook outbox are not fenced. Call it once, before
// anything else; calling it again for the same node changes nothing, and
// Fence("") turns fencing off.
func (s *Store) Fence(node string) { s.fence.Fence(node) }

// fenceSQL reads and share-locks the lease rows of sessions ($1), in key
// order: FOR SHARE waits for a takeover in flight and holds the next one
// off until this transaction ends, and the order is the one every
// statement that locks several leases uses.
//
// The lock order: a transaction that locks a session row and a lease row
// locks the session row first. AppendEvents (its last_seq bump),
// UpdateSession and EnqueuePrompt check the fence after their session
// lock; the statements that lock leases exclusively (AcquireLease,
// ReleaseLease, Heartbeat, LeaveNode) lock no session row, and those that
// lock several leases lock them in key order. So waits only go from
// session locks to lease locks, and no writers wait for each other in a
// cycle.
const fenceSQL = `SELECT s.id, l.owner, l.token FROM leases l JOIN sessions s ON s.pk = l.session_pk
WHERE s.id = ANY($1) ORDER BY l.session_pk FOR SHARE OF l`

// leaseRow is one row of fenceSQL.
type leaseRow struct {
	id    string
	owner string
	token int64
}

// leaseOf looks a session up in rows of fenceSQL, for fence.Book.Check.
func leaseOf(rows []leaseRow) func(id string) (string, int64, bool) {
	by := make(map[string]*leaseRow, len(rows))
	for i := range rows {
		by[rows[i].id] = &rows[i]
	}
	return func(id string) (string, int64, bool) {
		if r, ok := by[id]; ok {
			return r.owner, r.token, true
		}
		return "", 0, false
	}
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

// checkFence, when the store is fenced, locks the lease of a session in tx
// and fails with ELeaseLost unless this node holds it with the remembered
// token. A session that does not exist is ENotFound, as the write would
// have said.
func (s *Store) checkFence(ctx context.Context, tx pgx.Tx, sessionID string) error {
	if _, ok := s.fence.Node(); !ok {
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
	verr := s.fence.Check([]string{sessionID}, leaseOf(got))
	if verr == nil || len(got) > 0 {
		return verr
	}
	// No lease row: tell a missing session apart.
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1`, sessionID).Scan(&one)
	if err := codec.OneRow(err, "check lease", "session %s not found", sessionID); err != nil {
		return err
	}
	return verr
}

// querier is what statements run on (a write's, eachRow's): a pooled
// connection or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// fenced runs fn, a write naming sessionID, on a pooled connection or,
// when the store is fenced, in a transaction that checks the lease first
// (checkFence). fn's error comes back as fn returned it, so the caller
// reads it as before; a fence error is a *berth.Error (see isBerthError).
func (s *Store) fenced(ctx context.Context, sessionID string, fn func(q querier) error) error {
	if _, ok := s.fence.Node(); !ok {
		return s.pool.with(ctx, func(c *pgx.Conn) error { return fn(c) })
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.checkFence(ctx, tx, sessionID); err != nil {
			return err
		}
		return fn(tx)
	})
}

// isBerthError reports whether err already carries a code (a fence's
// verdict, a failed transaction), which a caller passes on as it is.
func isBerthError(err error) bool {
	var be *berth.Error
	return errors.As(err, &be)
}
