package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

var _ berth.NodeStore = (*Store)(nil)

// registerNodeSQL inserts a node or marks it up again. A node that was not
// up (lost or left) comes back as a new incarnation, so its heartbeats no
// longer renew the leases of the old one.
const registerNodeSQL = `INSERT INTO nodes AS n (id, advertise, state, incarnation, started_at, last_heartbeat)
VALUES ($1, $2, 'up', 1, $3, $4)
ON CONFLICT (id) DO UPDATE SET
    advertise = excluded.advertise,
    started_at = excluded.started_at,
    last_heartbeat = excluded.last_heartbeat,
    state = 'up',
    incarnation = CASE WHEN n.state = 'up' THEN n.incarnation ELSE n.incarnation + 1 END
RETURNING incarnation`

// RegisterNode inserts n or, when its id exists, marks it up again with
// n's Advertise and StartedAt and a heartbeat at now; it sets n.State and
// n.LastHeartbeat. A node registering again while still up (a restart
// within the lease TTL) is the same incarnation and keeps its leases; one
// that was lost or left is a new one, which holds none of the old leases:
// its heartbeats do not renew them, and a fenced store forgets the tokens
// it remembered. Register before acquiring leases. EInvalid for an empty
// id or times out of range.
func (s *Store) RegisterNode(ctx context.Context, n *berth.Node, now time.Time) error {
	started, at, err := codec.NodeTimes(n, now)
	if err != nil {
		return err
	}
	var inc int64
	if err := s.queryRow(ctx, registerNodeSQL, []any{n.ID, n.Advertise, started, at}, &inc); err != nil {
		return internal(err, "register node")
	}
	s.fence.Registered(n.ID, inc)
	n.State, n.LastHeartbeat = berth.NodeUp, codec.FromNanos(at)
	return nil
}

// renewLeasesSQL renews the leases of one incarnation of a node, locking
// them in key order (as the fence check does) so that the two cannot
// deadlock.
const renewLeasesSQL = `UPDATE leases SET expires_at = GREATEST(expires_at, $3)
WHERE session_pk IN (SELECT session_pk FROM leases WHERE owner = $1 AND incarnation = $2
    ORDER BY session_pk FOR UPDATE)`

// Heartbeat records that node id is alive at now (a heartbeat never moves
// back) and renews, in the same transaction, every lease its current
// incarnation holds until now+ttl (never shortening one). ENodeLost when
// the node is marked lost or left: nothing is renewed, and a fenced store
// forgets every token, so that no write of the node passes any more.
// ENotFound if the node is absent; EInvalid for a ttl that is not positive
// or times out of range.
func (s *Store) Heartbeat(ctx context.Context, id string, now time.Time, ttl time.Duration) error {
	at, until, err := codec.HeartbeatTimes(now, ttl)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var inc int64
		err := tx.QueryRow(ctx, `UPDATE nodes SET last_heartbeat = GREATEST(last_heartbeat, $2)
			WHERE id = $1 AND state = 'up' RETURNING incarnation`, id, at).Scan(&inc)
		if errors.Is(err, pgx.ErrNoRows) {
			var state string
			err := tx.QueryRow(ctx, `SELECT state FROM nodes WHERE id = $1`, id).Scan(&state)
			if err := codec.OneRow(err, "heartbeat", "node %s not found", id); err != nil {
				return err
			}
			return codec.NodeLost(id, berth.NodeState(state))
		}
		if err != nil {
			return internal(err, "heartbeat")
		}
		if _, err := tx.Exec(ctx, renewLeasesSQL, id, inc, until); err != nil {
			return internal(err, "renew leases")
		}
		return nil
	})
	if berth.ErrorCode(err) == berth.ENodeLost {
		s.fence.Lost(id)
	}
	return err
}

// ListNodes returns every node, oldest (by start time, then id) first,
// each with the number of leases it holds (expired ones not yet taken
// over included).
func (s *Store) ListNodes(ctx context.Context) ([]*berth.Node, error) {
	return collect(ctx, s, "list nodes", `SELECT `+codec.NodeColumns+` FROM nodes ORDER BY started_at NULLS FIRST, id`, nil, codec.ScanNode)
}

// MarkLostNodes marks lost every up node whose last heartbeat is before
// now-ttl and returns them (with their lease counts), oldest heartbeat
// first. One UPDATE does it: a concurrent caller waits for the row and
// then sees it lost, so each node goes to exactly one caller.
func (s *Store) MarkLostNodes(ctx context.Context, now time.Time, ttl time.Duration) ([]*berth.Node, error) {
	cut, ok := codec.ToNanos(now.Add(-ttl))
	if !ok {
		return nil, berth.Errorf(berth.EInvalid, "heartbeat time out of range")
	}
	out, err := collect(ctx, s, "mark lost nodes", `UPDATE nodes SET state = 'lost' WHERE state = 'up' AND last_heartbeat < $1
		RETURNING `+codec.NodeColumns, []any{cut}, codec.ScanNode)
	if err != nil {
		return nil, err
	}
	sortByHeartbeat(out)
	return out, nil
}

// LeaveNode marks node id left and releases the leases of its current
// incarnation (a clean stop); a fenced store forgets its tokens. Leaving
// twice is no error. ENodeLost if the node is lost: its leases belong to
// the takeover. ENotFound if the node is absent.
func (s *Store) LeaveNode(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var state string
		var inc int64
		err := tx.QueryRow(ctx, `SELECT state, incarnation FROM nodes WHERE id = $1 FOR UPDATE`, id).Scan(&state, &inc)
		if err := codec.OneRow(err, "leave", "node %s not found", id); err != nil {
			return err
		}
		if left, err := codec.Leaving(id, berth.NodeState(state)); left || err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE nodes SET state = 'left' WHERE id = $1`, id); err != nil {
			return internal(err, "leave")
		}
		// In key order, as everywhere leases are locked.
		if _, err := tx.Exec(ctx, `UPDATE leases SET owner = '' WHERE session_pk IN (SELECT session_pk FROM leases
			WHERE owner = $1 AND incarnation = $2 ORDER BY session_pk FOR UPDATE)`, id, inc); err != nil {
			return internal(err, "release leases")
		}
		return nil
	})
	if err == nil {
		s.fence.Lost(id)
	}
	return err
}

// LeasesOf returns the leases owner holds, expired or not, by session id.
// EInvalid for an empty owner.
func (s *Store) LeasesOf(ctx context.Context, owner string) ([]*berth.Lease, error) {
	if owner == "" {
		return nil, berth.Errorf(berth.EInvalid, "lease owner must not be empty")
	}
	return collect(ctx, s, "list leases", `SELECT s.id, l.token, l.expires_at FROM leases l JOIN sessions s ON s.pk = l.session_pk
		WHERE l.owner = $1 ORDER BY s.id`, []any{owner}, func(row codec.Row) (*berth.Lease, error) {
		l := &berth.Lease{Owner: owner}
		var expires int64
		err := row.Scan(&l.SessionID, &l.Token, &expires)
		l.ExpiresAt = codec.FromNanos(expires)
		return l, err
	})
}

// sortByHeartbeat orders nodes by last heartbeat, then id.
func sortByHeartbeat(nodes []*berth.Node) {
	slices.SortFunc(nodes, func(a, b *berth.Node) int {
		return cmp.Or(a.LastHeartbeat.Compare(b.LastHeartbeat), cmp.Compare(a.ID, b.ID))
	})
}
