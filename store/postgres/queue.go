package postgres

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

// queueCols are the columns scanQueueEntry reads, in its order.
const queueCols = `id, kind, text, generation, state, turn_id, created_at, content`

// claimQueueEntrySQL moves the oldest pending entry of a kind and
// generation to dispatched. The subquery locks that one row and skips rows
// other claimers hold, so concurrent claimers each get a different entry
// and none waits; the outer UPDATE re-checks the state for the same reason.
const claimQueueEntrySQL = `UPDATE queue_entries SET state = 'dispatched', turn_id = $4
WHERE state = 'pending' AND ord = (
    SELECT ord FROM queue_entries
    WHERE session_pk = (SELECT pk FROM sessions WHERE id = $1)
      AND state = 'pending' AND kind = $2 AND generation = $3
    ORDER BY ord LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING ` + queueCols

// cancelQueueSQL cancels the pending entries of a session older than a
// generation (all of them for 0) and returns them in arrival order:
// RETURNING alone promises no order.
const cancelQueueSQL = `WITH gone AS (
    UPDATE queue_entries SET state = 'canceled'
    WHERE session_pk = (SELECT pk FROM sessions WHERE id = $1)
      AND state = 'pending' AND ($2::bigint = 0 OR generation < $2::bigint)
    RETURNING ord, ` + queueCols + `)
SELECT ` + queueCols + ` FROM gone ORDER BY ord`

// EnqueuePrompt stores e as a pending entry (it sets e.State) and returns
// its position among the session's pending entries of its kind. A queue
// entry is refused with EQueueFull, and nothing stored, when the session
// already holds maxPending pending queue entries (so maxPending <= 0 refuses
// every one). A steer entry cancels the session's pending steer in the same
// transaction and reports its id as Replaced. EInvalid for an entry without
// id or session or of an unknown kind, ENotFound if the session is absent,
// EConflict if the id exists.
func (s *Store) EnqueuePrompt(ctx context.Context, e *berth.QueueEntry, maxPending int) (berth.EnqueueResult, error) {
	var res berth.EnqueueResult
	if err := codec.CheckQueueEntry(e); err != nil {
		return res, err
	}
	created, err := codec.NanosArg(e.CreatedAt, "queue entry time")
	if err != nil {
		return res, err
	}
	content, err := codec.EncodeContent(e.Content)
	if err != nil {
		return res, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		res = berth.EnqueueResult{}
		// Lock the session row: enqueuers of one session run one at a time,
		// so the count below cannot go stale before the insert. Unlike FOR
		// UPDATE, NO KEY UPDATE does not block inserts that reference the
		// session (their foreign key check takes KEY SHARE).
		var pk int64
		err := tx.QueryRow(ctx, `SELECT pk FROM sessions WHERE id = $1 FOR NO KEY UPDATE`, e.SessionID).Scan(&pk)
		if err := codec.OneRow(err, "enqueue prompt", "session %s not found", e.SessionID); err != nil {
			return err
		}
		// After the row lock: see the lock order at fenceSQL.
		if err := s.checkFence(ctx, tx, e.SessionID); err != nil {
			return err
		}
		if e.Kind == berth.EntrySteer {
			// The new steer replaces the pending one (at most one).
			rows, err := tx.Query(ctx, `UPDATE queue_entries SET state = 'canceled'
				WHERE session_pk = $1 AND state = 'pending' AND kind = 'steer' RETURNING id`, pk)
			if err != nil {
				return internal(err, "replace pending steer")
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return internal(err, "replace pending steer")
			}
			if len(ids) > 0 {
				res.Replaced = ids[len(ids)-1]
			}
			res.Position = 1
		} else {
			var n int
			err := tx.QueryRow(ctx, `SELECT count(*) FROM queue_entries
				WHERE session_pk = $1 AND state = 'pending' AND kind = 'queue'`, pk).Scan(&n)
			if err != nil {
				return internal(err, "count pending queue entries")
			}
			if n >= maxPending {
				return &berth.Error{Code: berth.EQueueFull,
					Message: "session " + e.SessionID + " has too many queued prompts",
					Details: map[string]any{"max_pending": maxPending}}
			}
			res.Position = n + 1
		}
		_, err = tx.Exec(ctx, `INSERT INTO queue_entries (id, session_pk, kind, text, generation, state, turn_id, created_at, content)
			VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8)`, e.ID, pk, e.Kind, e.Text, e.Generation, e.TurnID, created, content)
		if isUniqueViolation(err) {
			return berth.WrapError(berth.EConflict, err, "queue entry %s already exists", e.ID)
		}
		if err != nil {
			return internal(err, "insert queue entry")
		}
		return nil
	})
	if err != nil {
		return berth.EnqueueResult{}, err
	}
	e.State = berth.EntryPending
	return res, nil
}

// ListQueue returns a session's pending entries in arrival order, each
// with its 1-based Position among the pending entries of its kind.
// ENotFound if the session is absent.
func (s *Store) ListQueue(ctx context.Context, sessionID string) ([]*berth.QueueEntry, error) {
	return collectOfSession(ctx, s, sessionID, "list queue", `SELECT `+queueCols+`, row_number() OVER (PARTITION BY kind ORDER BY ord)
		FROM queue_entries WHERE session_pk = (SELECT pk FROM sessions WHERE id = $1) AND state = 'pending'
		ORDER BY ord`, []any{sessionID}, func(row codec.Row) (*berth.QueueEntry, error) {
		return scanQueueEntry(row, sessionID, true)
	})
}

// ClaimQueueEntry moves the oldest pending entry of kind and generation to
// dispatched, records turnID on it and returns it. Concurrent claimers
// never get the same entry. ENotFound when there is none.
func (s *Store) ClaimQueueEntry(ctx context.Context, sessionID, kind string, generation int64, turnID string) (*berth.QueueEntry, error) {
	var e *berth.QueueEntry
	err := s.fenced(ctx, sessionID, func(q querier) error {
		var err error
		e, err = scanQueueEntry(q.QueryRow(ctx, claimQueueEntrySQL, sessionID, kind, generation, turnID), sessionID, false)
		return err
	})
	if isBerthError(err) {
		return nil, err
	}
	if err := codec.OneRow(err, "claim queue entry", "session %s has no pending %s entry of generation %d", sessionID, kind, generation); err != nil {
		return nil, err
	}
	return e, nil
}

// CancelQueueEntry moves one pending entry to canceled and returns it.
// ENotFound if the session has no pending entry with that id.
func (s *Store) CancelQueueEntry(ctx context.Context, sessionID, entryID string) (*berth.QueueEntry, error) {
	var e *berth.QueueEntry
	err := s.fenced(ctx, sessionID, func(q querier) error {
		row := q.QueryRow(ctx, `UPDATE queue_entries SET state = 'canceled'
			WHERE id = $2 AND session_pk = (SELECT pk FROM sessions WHERE id = $1) AND state = 'pending'
			RETURNING `+queueCols, sessionID, entryID)
		var err error
		e, err = scanQueueEntry(row, sessionID, false)
		return err
	})
	if isBerthError(err) {
		return nil, err
	}
	if err := codec.OneRow(err, "cancel queue entry", "session %s has no pending entry %s", sessionID, entryID); err != nil {
		return nil, err
	}
	return e, nil
}

// CancelQueue moves every pending entry of the session older than
// generation (all of them when generation is 0) to canceled and returns
// them in arrival order. A session that does not exist has none.
func (s *Store) CancelQueue(ctx context.Context, sessionID string, generation int64) ([]*berth.QueueEntry, error) {
	out := []*berth.QueueEntry{}
	err := s.fenced(ctx, sessionID, func(q querier) error {
		rows, err := q.Query(ctx, cancelQueueSQL, sessionID, generation)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanQueueEntry(rows, sessionID, false)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if isBerthError(err) {
		return nil, err
	}
	if err != nil {
		return nil, internal(err, "cancel queue")
	}
	return out, nil
}

// scanQueueEntry reads the queueCols of one row, followed by the entry's
// position when withPosition is set.
func scanQueueEntry(row codec.Row, sessionID string, withPosition bool) (*berth.QueueEntry, error) {
	e := &berth.QueueEntry{SessionID: sessionID}
	var created *int64
	var content string
	dest := []any{&e.ID, &e.Kind, &e.Text, &e.Generation, &e.State, &e.TurnID, &created, &content}
	if withPosition {
		dest = append(dest, &e.Position)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	e.CreatedAt = codec.FromNullNanos(created)
	var err error
	if e.Content, err = codec.DecodeContent(content); err != nil {
		return nil, err
	}
	return e, nil
}

// sessionExists returns nil when the session exists, ENotFound when it
// does not.
func (s *Store) sessionExists(ctx context.Context, id string) error {
	var one int
	err := s.queryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1`, []any{id}, &one)
	if err := codec.OneRow(err, "find session", "session %s not found", id); err != nil {
		return err
	}
	return nil
}
