package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.HookStore = (*Store)(nil)

// InitHookCursors implements berth.HookStore.
func (s *Store) InitHookCursors(ctx context.Context) error {
	return s.inWriteTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM hook_meta WHERE key = 'cursors'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO hook_cursors (session_id, seq, badge)
			SELECT id, last_seq, '?' FROM sessions WHERE true
			ON CONFLICT (session_id) DO UPDATE SET seq = max(seq, excluded.seq)`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO hook_meta (key, value) VALUES ('cursors', 'set')`)
		return err
	}, "init hook cursors")
}

// ResetHookCursors implements berth.HookStore.
func (s *Store) ResetHookCursors(ctx context.Context) error {
	if s.noHookCursors.Load() {
		return nil
	}
	return s.inWriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM hook_cursors`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM hook_meta WHERE key = 'cursors'`)
		return err
	}, "reset hook cursors")
}

// GetHookCursor implements berth.HookStore.
func (s *Store) GetHookCursor(ctx context.Context, sessionID string) (berth.HookCursor, bool, error) {
	var c berth.HookCursor
	var badge string
	err := s.r.QueryRowContext(ctx, `SELECT seq, badge FROM hook_cursors WHERE session_id = ?`, sessionID).Scan(&c.Seq, &badge)
	c.Badge = berth.Badge(badge)
	ok, err := codec.Found(err, "read hook cursor")
	return c, ok, err
}

// EnqueueHookDeliveries implements berth.HookStore.
func (s *Store) EnqueueHookDeliveries(ctx context.Context, sessionID string, c berth.HookCursor, ds []*berth.HookDelivery) error {
	if err := codec.CheckDeliveries(ds); err != nil {
		return err
	}
	return s.inWriteTx(ctx, func(tx *sql.Tx) error {
		for _, d := range ds {
			next := d.CreatedAt
			if d.NextAttemptAt != nil {
				next = *d.NextAttemptAt
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO hook_deliveries
				(id, hook, hook_index, event, session_id, seq, state, attempts, last_error, next_attempt_at, created_at, body)
				VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, '', ?, ?, ?)
				ON CONFLICT (hook, session_id, seq, event) DO NOTHING`,
				d.ID, d.Hook, d.HookIndex, d.Event, d.SessionID, d.Seq, codec.SortNanos(next), codec.SortNanos(d.CreatedAt), d.Body); err != nil {
				return err
			}
			d.State = berth.DeliveryPending
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO hook_cursors (session_id, seq, badge) VALUES (?, ?, ?)
			ON CONFLICT (session_id) DO UPDATE SET seq = max(seq, excluded.seq),
			badge = CASE WHEN excluded.badge = '' THEN badge ELSE excluded.badge END`,
			sessionID, c.Seq, string(c.Badge))
		return err
	}, "enqueue hook deliveries")
}

// ClaimHookDeliveries implements berth.HookStore.
func (s *Store) ClaimHookDeliveries(ctx context.Context, hook, owner string, now, until time.Time, n int) ([]*berth.HookDelivery, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []*berth.HookDelivery
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		nowN := codec.SortNanos(now)
		var err error
		out, err = collect(ctx, tx, "claim hook deliveries", `SELECT `+codec.DeliveryColumns+` FROM hook_deliveries d
			WHERE d.state = 'pending' AND d.hook = ? AND d.next_attempt_at <= ? AND d.claimed_until <= ?
			AND d.ord = (SELECT min(h.ord) FROM hook_deliveries h
				WHERE h.hook = d.hook AND h.session_id = d.session_id AND h.state = 'pending')
			ORDER BY d.next_attempt_at, d.ord LIMIT ?`, []any{hook, nowN, nowN, n}, codec.ScanDelivery)
		if err != nil {
			return err
		}
		for _, d := range out {
			if _, err := tx.ExecContext(ctx, `UPDATE hook_deliveries SET claimed_by = ?, claimed_until = ? WHERE ord = ?`,
				owner, codec.SortNanos(until), d.Ord); err != nil {
				return err
			}
		}
		return nil
	}, "claim hook deliveries")
	return out, err
}

// FinishHookAttempt implements berth.HookStore.
func (s *Store) FinishHookAttempt(ctx context.Context, d *berth.HookDelivery) error {
	var next int64
	if d.NextAttemptAt != nil {
		next = codec.SortNanos(*d.NextAttemptAt)
	}
	var delivered any
	if d.DeliveredAt != nil {
		delivered = codec.SortNanos(*d.DeliveredAt)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE hook_deliveries SET state = ?, attempts = ?, last_error = ?,
		next_attempt_at = ?, delivered_at = ?, claimed_by = '', claimed_until = 0 WHERE id = ?`,
		d.State, d.Attempts, d.LastError, next, delivered, d.ID)
	if err != nil {
		return internal(err, "record hook attempt")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return berth.Errorf(berth.ENotFound, "hook delivery %s not found", d.ID)
	}
	return nil
}

// ReleaseHookClaims implements berth.HookStore.
func (s *Store) ReleaseHookClaims(ctx context.Context, owner string) error {
	if _, err := s.w.ExecContext(ctx, `UPDATE hook_deliveries SET claimed_by = '', claimed_until = 0
		WHERE claimed_by = ? AND state = 'pending'`, owner); err != nil {
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
	q := `SELECT ` + codec.DeliveryColumns + ` FROM hook_deliveries WHERE ord < ?`
	args := []any{before}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.SessionID != "" {
		q += ` AND session_id = ?`
		args = append(args, f.SessionID)
	}
	q += ` ORDER BY ord DESC LIMIT ?`
	args = append(args, limit+1)
	ds, err := collect(ctx, s.r, "list hook deliveries", q, args, codec.ScanDelivery)
	if err != nil {
		return nil, err
	}
	return codec.DeliveriesPage(ds, limit), nil
}

// PruneHookDeliveries implements berth.HookStore.
func (s *Store) PruneHookDeliveries(ctx context.Context, deliveredBefore time.Time, keepDelivered int, failedBefore time.Time) (int64, error) {
	var total int64
	err := s.inWriteTx(ctx, func(tx *sql.Tx) error {
		total = 0
		for _, st := range []struct {
			sql  string
			args []any
		}{
			{`DELETE FROM hook_deliveries WHERE state = 'delivered' AND delivered_at < ?`, []any{codec.SortNanos(deliveredBefore)}},
			{`DELETE FROM hook_deliveries WHERE state = 'delivered' AND ord < (SELECT coalesce(min(ord), 0) FROM
				(SELECT ord FROM hook_deliveries WHERE state = 'delivered' ORDER BY ord DESC LIMIT ?))`, []any{keepDelivered}},
			{`DELETE FROM hook_deliveries WHERE state = 'failed' AND created_at < ?`, []any{codec.SortNanos(failedBefore)}},
		} {
			res, err := tx.ExecContext(ctx, st.sql, st.args...)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			total += n
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM hook_cursors WHERE session_id NOT IN (SELECT id FROM sessions)`)
		return err
	}, "prune hook deliveries")
	return total, err
}

// inWriteTx runs fn in a transaction on the writer connection and commits
// it if fn succeeds; any failure is EInternal saying what failed, unless
// fn returned a coded error.
func (s *Store) inWriteTx(ctx context.Context, fn func(tx *sql.Tx) error, what string) error {
	s.noHookCursors.Store(false)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return internal(err, "%s", what)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		if berth.ErrorCode(err) != "" && berth.ErrorCode(err) != berth.EInternal {
			return err
		}
		return internal(err, "%s", what)
	}
	if err := tx.Commit(); err != nil {
		return internal(err, "%s", what)
	}
	return nil
}
