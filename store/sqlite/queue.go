package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// queueColumns are the columns of a queue entry that scanQueueEntry reads,
// in its order.
const queueColumns = `ord, id, kind, state, generation, turn_id, text, created_at, content`

// claimQueueSQL dispatches the oldest pending entry of a kind and
// generation. The subquery walks queue_by_state in arrival order from the
// first pending entry of the kind and stops at the first of the generation;
// the UPDATE's own state term makes the claim atomic even if two claims
// ever raced.
const claimQueueSQL = `UPDATE queue_entries SET state = ?, turn_id = ?
WHERE ord = (SELECT ord FROM queue_entries
    WHERE session_pk = (SELECT pk FROM sessions WHERE id = ?) AND state = ? AND kind = ? AND generation = ?
    ORDER BY ord LIMIT 1)
  AND state = ?
RETURNING ` + queueColumns

// pendingQueueSQL lists a session's pending entries in arrival order.
const pendingQueueSQL = `SELECT ` + queueColumns + ` FROM queue_entries
WHERE session_pk = ? AND state = ? ORDER BY ord`

// countPendingSQL counts a session's pending entries of one kind, from
// queue_by_state alone.
const countPendingSQL = `SELECT count(*) FROM queue_entries WHERE session_pk = ? AND state = ? AND kind = ?`

// scanQueueEntry reads the queueColumns of one row of sessionID, and
// returns the entry and its arrival order.
func scanQueueEntry(sc codec.Row, sessionID string) (*berth.QueueEntry, int64, error) {
	e := &berth.QueueEntry{SessionID: sessionID}
	var ord int64
	var created *int64
	var content string
	if err := sc.Scan(&ord, &e.ID, &e.Kind, &e.State, &e.Generation, &e.TurnID, &e.Text, &created, &content); err != nil {
		return nil, 0, err
	}
	var err error
	if e.Content, err = codec.DecodeContent(content); err != nil {
		return nil, 0, err
	}
	e.CreatedAt = codec.FromNullNanos(created)
	return e, ord, nil
}

// EnqueuePrompt stores e as a pending entry, sets e.State to pending and
// says where it stands among the session's pending entries of its kind. A
// queue entry is refused with EQueueFull when the session already holds
// maxPending pending queue entries (so a maxPending of 0 or less refuses
// every one). A steer entry cancels the session's pending steer in the same
// transaction and names it in Replaced. EInvalid without an id or session,
// or for an unknown kind; ENotFound if the session is absent; EConflict if
// an entry with that id exists (in any session).
func (s *Store) EnqueuePrompt(ctx context.Context, e *berth.QueueEntry, maxPending int) (berth.EnqueueResult, error) {
	var res berth.EnqueueResult
	if err := codec.CheckQueueEntry(e); err != nil {
		return res, err
	}
	created, err := codec.NanosArg(e.CreatedAt, "queue entry created_at")
	if err != nil {
		return res, err
	}
	content, err := codec.EncodeContent(e.Content)
	if err != nil {
		return res, err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		pk, err := sessionPK(ctx, tx, e.SessionID)
		if err != nil {
			return err
		}
		if e.Kind == berth.EntrySteer {
			// A session holds at most one pending steer: the new one
			// replaces it. No row means there was none.
			err := tx.QueryRowContext(ctx, `UPDATE queue_entries SET state = ?
				WHERE session_pk = ? AND state = ? AND kind = ? RETURNING id`,
				berth.EntryCanceled, pk, berth.EntryPending, berth.EntrySteer).Scan(&res.Replaced)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return internal(err, "replace the pending steer")
			}
		}
		var pending int
		if err := tx.QueryRowContext(ctx, countPendingSQL, pk, berth.EntryPending, e.Kind).Scan(&pending); err != nil {
			return internal(err, "count pending entries")
		}
		if e.Kind == berth.EntryQueue && pending >= maxPending {
			return &berth.Error{Code: berth.EQueueFull,
				Message: "session " + e.SessionID + " has no room for another queued prompt",
				Details: map[string]any{"max_pending": maxPending}}
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO queue_entries
			(session_pk, id, kind, state, generation, turn_id, text, created_at, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			pk, e.ID, e.Kind, berth.EntryPending, e.Generation, e.TurnID, e.Text, created, content)
		if isConstraint(err) {
			return berth.WrapError(berth.EConflict, err, "queue entry %s already exists", e.ID)
		}
		if err != nil {
			return internal(err, "insert queue entry")
		}
		// The new entry is the newest, so it comes after every pending one.
		res.Position = pending + 1
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
	var out []*berth.QueueEntry
	err := s.inReadTx(ctx, func(tx *sql.Tx) error {
		pk, err := sessionPK(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		out, err = collect(ctx, tx, "list queue", pendingQueueSQL, []any{pk, berth.EntryPending}, func(row codec.Row) (*berth.QueueEntry, error) {
			e, _, err := scanQueueEntry(row, sessionID)
			return e, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	// Positions count per kind, in the arrival order the rows come in.
	seen := map[string]int{}
	for _, e := range out {
		seen[e.Kind]++
		e.Position = seen[e.Kind]
	}
	return out, nil
}

// ClaimQueueEntry moves the oldest pending entry of kind and generation to
// dispatched, records turnID on it and returns it. ENotFound when there is
// none (or the session is absent): an entry is claimed at most once.
func (s *Store) ClaimQueueEntry(ctx context.Context, sessionID, kind string, generation int64, turnID string) (*berth.QueueEntry, error) {
	var e *berth.QueueEntry
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, claimQueueSQL, berth.EntryDispatched, turnID,
			sessionID, berth.EntryPending, kind, generation, berth.EntryPending)
		var err error
		e, _, err = scanQueueEntry(row, sessionID)
		if err := codec.OneRow(err, "claim queue entry", "session %s has no pending %s entry of generation %d", sessionID, kind, generation); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// CancelQueueEntry moves one pending entry to canceled and returns it.
// ENotFound if the session has no pending entry with that id.
func (s *Store) CancelQueueEntry(ctx context.Context, sessionID, entryID string) (*berth.QueueEntry, error) {
	var e *berth.QueueEntry
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, `UPDATE queue_entries SET state = ?
			WHERE session_pk = (SELECT pk FROM sessions WHERE id = ?) AND id = ? AND state = ?
			RETURNING `+queueColumns, berth.EntryCanceled, sessionID, entryID, berth.EntryPending)
		var err error
		e, _, err = scanQueueEntry(row, sessionID)
		if err := codec.OneRow(err, "cancel queue entry", "session %s has no pending entry %s", sessionID, entryID); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// CancelQueue moves every pending entry of the session of a generation
// older than generation (every pending entry when generation is 0) to
// canceled and returns them in arrival order. A session that is absent has
// none.
func (s *Store) CancelQueue(ctx context.Context, sessionID string, generation int64) ([]*berth.QueueEntry, error) {
	type canceled struct {
		e   *berth.QueueEntry
		ord int64
	}
	var gone []canceled
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// ?4 = 0 OR generation < ?4: one statement for "all" and "older than".
		var err error
		gone, err = collect(ctx, tx, "cancel queue", `UPDATE queue_entries SET state = ?1
			WHERE session_pk = (SELECT pk FROM sessions WHERE id = ?2) AND state = ?3 AND (?4 = 0 OR generation < ?4)
			RETURNING `+queueColumns, []any{berth.EntryCanceled, sessionID, berth.EntryPending, generation}, func(row codec.Row) (canceled, error) {
			e, ord, err := scanQueueEntry(row, sessionID)
			return canceled{e, ord}, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING gives rows in no defined order: sort them by arrival.
	slices.SortFunc(gone, func(a, b canceled) int { return cmp.Compare(a.ord, b.ord) })
	out := make([]*berth.QueueEntry, len(gone))
	for i, c := range gone {
		out[i] = c.e
	}
	return out, nil
}
