package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

var _ berth.HookStore = (*Store)(nil)

// hookTx runs fn in a transaction; an uncoded failure becomes EInternal
// saying what failed.
func (s *Store) hookTx(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	err := s.inTx(ctx, fn)
	var be *berth.Error
	if err != nil && !errors.As(err, &be) {
		return internal(err, "%s", what)
	}
	return err
}

// InitHookCursors implements berth.HookStore.
func (s *Store) InitHookCursors(ctx context.Context) error {
	return s.hookTx(ctx, "init hook cursors", func(tx pgx.Tx) error {
		// Two nodes starting at once: the second waits here and then sees
		// the first one's mark.
		if _, err := tx.Exec(ctx, `LOCK TABLE hook_meta IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM hook_meta WHERE key = 'cursors'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `INSERT INTO hook_cursors (session_id, seq, badge)
			SELECT id, last_seq, '?' FROM sessions
			ON CONFLICT (session_id) DO UPDATE SET seq = greatest(hook_cursors.seq, excluded.seq)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO hook_meta (key, value) VALUES ('cursors', 'set')`)
		return err
	})
}

// ResetHookCursors implements berth.HookStore.
func (s *Store) ResetHookCursors(ctx context.Context) error {
	return s.hookTx(ctx, "reset hook cursors", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM hook_cursors`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM hook_meta WHERE key = 'cursors'`)
		return err
	})
}

// GetHookCursor implements berth.HookStore.
func (s *Store) GetHookCursor(ctx context.Context, sessionID string) (berth.HookCursor, bool, error) {
	var c berth.HookCursor
	var badge string
	err := s.queryRow(ctx, `SELECT seq, badge FROM hook_cursors WHERE session_id = $1`, []any{sessionID}, &c.Seq, &badge)
	c.Badge = berth.Badge(badge)
	ok, err := codec.Found(err, "read hook cursor")
	return c, ok, err
}

// EnqueueHookDeliveries implements berth.HookStore.
func (s *Store) EnqueueHookDeliveries(ctx context.Context, sessionID string, c berth.HookCursor, ds []*berth.HookDelivery) error {
	if err := codec.CheckDeliveries(ds); err != nil {
		return err
	}
	return s.hookTx(ctx, "enqueue hook deliveries", func(tx pgx.Tx) error {
		for _, d := range ds {
			next := d.CreatedAt
			if d.NextAttemptAt != nil {
				next = *d.NextAttemptAt
			}
			if _, err := tx.Exec(ctx, `INSERT INTO hook_deliveries
				(id, hook, hook_index, event, session_id, seq, state, attempts, last_error, next_attempt_at, created_at, body)
				VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, '', $7, $8, $9)
				ON CONFLICT (hook, session_id, seq, event) DO NOTHING`,
				d.ID, d.Hook, d.HookIndex, d.Event, d.SessionID, d.Seq, codec.SortNanos(next), codec.SortNanos(d.CreatedAt), d.Body); err != nil {
				return err
			}
			d.State = berth.DeliveryPending
		}
		_, err := tx.Exec(ctx, `INSERT INTO hook_cursors (session_id, seq, badge) VALUES ($1, $2, $3)
			ON CONFLICT (session_id) DO UPDATE SET seq = greatest(hook_cursors.seq, excluded.seq),
			badge = CASE WHEN excluded.badge = '' THEN hook_cursors.badge ELSE excluded.badge END`,
			sessionID, c.Seq, string(c.Badge))
		return err
	})
}

// ClaimHookDeliveries implements berth.HookStore. Each claim is a
// conditional update, so two nodes never both claim one delivery.
func (s *Store) ClaimHookDeliveries(ctx context.Context, hook, owner string, now, until time.Time, n int) ([]*berth.HookDelivery, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []*berth.HookDelivery
	err := s.hookTx(ctx, "claim hook deliveries", func(tx pgx.Tx) error {
		out = out[:0]
		nowN := codec.SortNanos(now)
		rows, err := tx.Query(ctx, `SELECT `+codec.DeliveryColumns+` FROM hook_deliveries d
			WHERE d.state = 'pending' AND d.hook = $1 AND d.next_attempt_at <= $2 AND d.claimed_until <= $2
			AND d.ord = (SELECT min(h.ord) FROM hook_deliveries h
				WHERE h.hook = d.hook AND h.session_id = d.session_id AND h.state = 'pending')
			ORDER BY d.next_attempt_at, d.ord LIMIT $3`, hook, nowN, n)
		if err != nil {
			return err
		}
		var found []*berth.HookDelivery
		for rows.Next() {
			d, err := codec.ScanDelivery(rows)
			if err != nil {
				rows.Close()
				return err
			}
			found = append(found, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, d := range found {
			tag, err := tx.Exec(ctx, `UPDATE hook_deliveries SET claimed_by = $1, claimed_until = $2
				WHERE ord = $3 AND state = 'pending' AND claimed_until <= $4`, owner, codec.SortNanos(until), d.Ord, nowN)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 1 {
				out = append(out, d)
			}
		}
		return nil
	})
	return out, err
}

// FinishHookAttempt implements berth.HookStore.
func (s *Store) FinishHookAttempt(ctx context.Context, d *berth.HookDelivery) error {
	var next int64
	if d.NextAttemptAt != nil {
		next = codec.SortNanos(*d.NextAttemptAt)
	}
	var delivered *int64
	if d.DeliveredAt != nil {
		n := codec.SortNanos(*d.DeliveredAt)
		delivered = &n
	}
	var affected int64
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		tag, err := c.Exec(ctx, `UPDATE hook_deliveries SET state = $1, attempts = $2, last_error = $3,
			next_attempt_at = $4, delivered_at = $5, claimed_by = '', claimed_until = 0 WHERE id = $6`,
			d.State, d.Attempts, d.LastError, next, delivered, d.ID)
		affected = tag.RowsAffected()
		return err
	})
	if err != nil {
		return internal(err, "record hook attempt")
	}
	if affected == 0 {
		return berth.Errorf(berth.ENotFound, "hook delivery %s not found", d.ID)
	}
	return nil
}

// ReleaseHookClaims implements berth.HookStore.
func (s *Store) ReleaseHookClaims(ctx context.Context, owner string) error {
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `UPDATE hook_deliveries SET claimed_by = '', claimed_until = 0
			WHERE claimed_by = $1 AND state = 'pending'`, owner)
		return err
	})
	if err != nil {
		return internal(err, "release hook claims")
	}
	return nil
}

// ListHookDeliveries implements berth.HookStore.
func (s *Store) ListHookDeliveries(ctx context.Context, f berth.HookDeliveryFilter) (*berth.HookDeliveryPage, error) {
	limit, before, err := codec.DeliveryPage(f)
	if err != nil {
		return nil, err
	}
	q := `SELECT ` + codec.DeliveryColumns + ` FROM hook_deliveries WHERE ord < $1`
	args := []any{before}
	if f.State != "" {
		args = append(args, f.State)
		q += ` AND state = $` + strconv.Itoa(len(args))
	}
	if f.SessionID != "" {
		args = append(args, f.SessionID)
		q += ` AND session_id = $` + strconv.Itoa(len(args))
	}
	args = append(args, limit+1)
	q += ` ORDER BY ord DESC LIMIT $` + strconv.Itoa(len(args))
	ds, err := collect(ctx, s, "list hook deliveries", q, args, codec.ScanDelivery)
	if err != nil {
		return nil, err
	}
	return codec.DeliveriesPage(ds, limit), nil
}

// PruneHookDeliveries implements berth.HookStore.
func (s *Store) PruneHookDeliveries(ctx context.Context, deliveredBefore time.Time, keepDelivered int, failedBefore time.Time) (int64, error) {
	var total int64
	err := s.hookTx(ctx, "prune hook deliveries", func(tx pgx.Tx) error {
		total = 0
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{`DELETE FROM hook_deliveries WHERE state = 'delivered' AND delivered_at < $1`, []any{codec.SortNanos(deliveredBefore)}},
			{`DELETE FROM hook_deliveries WHERE state = 'delivered' AND ord < (SELECT coalesce(min(ord), 0) FROM
				(SELECT ord FROM hook_deliveries WHERE state = 'delivered' ORDER BY ord DESC LIMIT $1) AS newest)`, []any{keepDelivered}},
			{`DELETE FROM hook_deliveries WHERE state = 'failed' AND created_at < $1`, []any{codec.SortNanos(failedBefore)}},
		} {
			tag, err := tx.Exec(ctx, st.sql, st.args...)
			if err != nil {
				return err
			}
			total += tag.RowsAffected()
		}
		_, err := tx.Exec(ctx, `DELETE FROM hook_cursors c WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = c.session_id)`)
		return err
	})
	return total, err
}
