package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.NodeStore = (*Store)(nil)

// A SQLite store is not a berth.Fencer: one daemon opens it, so it has one
// node, and nothing takes its leases over.

// RegisterNode inserts n or, when its id exists, marks it up again with
// n's Advertise and StartedAt and a heartbeat at now; it sets n.State and
// n.LastHeartbeat. A node registering again while still up is the same
// incarnation and keeps its leases; one that was lost or left is a new
// one, whose heartbeats do not renew the old one's leases. EInvalid for
// an empty id or times out of range.
func (s *Store) RegisterNode(ctx context.Context, n *berth.Node, now time.Time) error {
	started, at, err := codec.NodeTimes(n, now)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO nodes AS n (id, advertise, state, incarnation, started_at, last_heartbeat)
			VALUES (?1, ?2, 'up', 1, ?3, ?4)
			ON CONFLICT (id) DO UPDATE SET
				advertise = excluded.advertise,
				started_at = excluded.started_at,
				last_heartbeat = excluded.last_heartbeat,
				state = 'up',
				incarnation = CASE WHEN n.state = 'up' THEN n.incarnation ELSE n.incarnation + 1 END`,
			n.ID, n.Advertise, started, at)
		if err != nil {
			return internal(err, "register node")
		}
		return nil
	})
	if err != nil {
		return err
	}
	n.State, n.LastHeartbeat = berth.NodeUp, codec.FromNanos(at)
	return nil
}

// Heartbeat records that node id is alive at now (never moving back) and
// renews, in the same transaction, every lease its current incarnation
// holds until now+ttl (never shortening one). ENodeLost when the node is
// lost or left; ENotFound if it is absent; EInvalid for a ttl that is not
// positive or times out of range.
func (s *Store) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	at, until, err := codec.HeartbeatTimes(now, ttl)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var state string
		var inc int64
		err := tx.QueryRowContext(ctx, `SELECT state, incarnation FROM nodes WHERE id = ?`, id).Scan(&state, &inc)
		if err := codec.OneRow(err, "heartbeat", "node %s not found", id); err != nil {
			return err
		}
		if state != string(berth.NodeUp) {
			return codec.NodeLost(id, berth.NodeState(state))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET last_heartbeat = max(last_heartbeat, ?) WHERE id = ?`, at, id); err != nil {
			return internal(err, "heartbeat")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leases SET expires_at = max(expires_at, ?) WHERE owner = ? AND incarnation = ?`,
			until, id, inc); err != nil {
			return internal(err, "renew leases")
		}
		return nil
	})
}

// ListNodes returns every node, oldest (by start time, then id) first,
// each with the number of leases it holds.
func (s *Store) ListNodes(ctx context.Context) ([]*berth.Node, error) {
	return collect(ctx, s.r, "list nodes", `SELECT `+codec.NodeColumns+` FROM nodes ORDER BY started_at NULLS FIRST, id`, nil, codec.ScanNode)
}

// MarkLostNodes marks lost every up node whose last heartbeat is before
// now-ttl and returns them, oldest heartbeat first. The one writer
// connection serialises callers, so each node goes to exactly one.
func (s *Store) MarkLostNodes(ctx context.Context, now time.Time, ttl time.Duration) ([]*berth.Node, error) {
	cut, ok := codec.ToNanos(now.Add(-ttl))
	if !ok {
		return nil, berth.Errorf(berth.EInvalid, "heartbeat time out of range")
	}
	var out []*berth.Node
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = collect(ctx, tx, "mark lost nodes", `UPDATE nodes SET state = 'lost' WHERE state = 'up' AND last_heartbeat < ?
			RETURNING `+codec.NodeColumns, []any{cut}, codec.ScanNode)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *berth.Node) int {
		return cmp.Or(a.LastHeartbeat.Compare(b.LastHeartbeat), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// LeaveNode marks node id left and releases the leases of its current
// incarnation. Leaving twice is no error. ENodeLost if the node is lost;
// ENotFound if it is absent.
func (s *Store) LeaveNode(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var state string
		var inc int64
		err := tx.QueryRowContext(ctx, `SELECT state, incarnation FROM nodes WHERE id = ?`, id).Scan(&state, &inc)
		if err := codec.OneRow(err, "leave", "node %s not found", id); err != nil {
			return err
		}
		if left, err := codec.Leaving(id, berth.NodeState(state)); left || err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET state = 'left' WHERE id = ?`, id); err != nil {
			return internal(err, "leave")
		}
		// A released lease is no row (see migration 0003).
		if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE owner = ? AND incarnation = ?`, id, inc); err != nil {
			return internal(err, "release leases")
		}
		return nil
	})
}

// LeasesOf returns the leases owner holds, expired or not, by session id.
// EInvalid for an empty owner.
func (s *Store) LeasesOf(ctx context.Context, owner string) ([]*berth.Lease, error) {
	if owner == "" {
		return nil, berth.Errorf(berth.EInvalid, "lease owner must not be empty")
	}
	return collect(ctx, s.r, "list leases", `SELECT s.id, l.token, l.expires_at FROM leases l JOIN sessions s ON s.pk = l.session_pk
		WHERE l.owner = ? ORDER BY s.id`, []any{owner}, func(row codec.Row) (*berth.Lease, error) {
		l := &berth.Lease{Owner: owner}
		var expires int64
		err := row.Scan(&l.SessionID, &l.Token, &expires)
		l.ExpiresAt = codec.FromNanos(expires)
		return l, err
	})
}
