package sqlite

import (
	"context"
	"database/sql"
	"sort"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

const getSessionSQL = `SELECT ` + codec.SessionColumns + ` FROM sessions WHERE id = ?`

// updateTallySQL sets codec.TallyColumns, in their order.
const updateTallySQL = `stop_reason = ?, failed = ?, waiting = ?, auth_missing = ?, needs_auth = ?, max_cost = ?, max_tokens = ?`

// CreateSession inserts s with its labels. EInvalid without an id,
// EConflict if the id exists.
func (s *Store) CreateSession(ctx context.Context, sess *berth.Session) error {
	doc, err := codec.EncodeSession(sess)
	if err != nil {
		return err
	}
	tally, err := codec.TallyValues(sess)
	if err != nil {
		return err
	}
	// Before the row exists, whether or not it commits: ListLive reads
	// from now on.
	s.empty.Store(false)
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, state, agent, parent_id, root_id, spawn_key, created_at, doc, shim_socket, `+codec.TallyColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			append([]any{sess.ID, string(sess.State), sess.Agent, sess.ParentID, codec.RootOf(sess), sess.SpawnKey, codec.SortNanos(sess.CreatedAt), doc, sess.ShimSocket}, tally...)...)
		if isConstraint(err) {
			return berth.WrapError(berth.EConflict, err, "session %s already exists", sess.ID)
		}
		if err != nil {
			return internal(err, "insert session")
		}
		return insertLabels(ctx, tx, sess.ID, sess.Labels)
	})
}

// insertLabels writes the label rows of a session.
func insertLabels(ctx context.Context, tx *sql.Tx, id string, labels map[string]string) error {
	for k, v := range labels {
		if _, err := tx.ExecContext(ctx, `INSERT INTO session_labels (session_id, key, value) VALUES (?, ?, ?)`, id, k, v); err != nil {
			return internal(err, "insert session label")
		}
	}
	return nil
}

// GetSession returns one session. ENotFound if there is none.
func (s *Store) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	if err := s.stmtsReady(ctx); err != nil {
		return nil, internal(err, "get session")
	}
	return codec.ScanSession(s.getSession.QueryRowContext(ctx, id).Scan, id)
}

// ListSessions returns a page of sessions, newest first (created_at, then
// id, descending), that match every given filter. Limit 0 means 50 and is
// capped at 1000. EInvalid for a malformed cursor or a negative limit.
func (s *Store) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	limit, err := codec.SessionLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	var q strings.Builder
	var args []any
	q.WriteString(`SELECT doc, last_seq, agent_offset, created_at, id, ` + codec.UsageColumns + ` FROM sessions WHERE 1 = 1`)
	if f.State != "" {
		q.WriteString(` AND state = ?`)
		args = append(args, string(f.State))
	}
	if f.Agent != "" {
		q.WriteString(` AND agent = ?`)
		args = append(args, f.Agent)
	}
	if f.Parent != "" {
		q.WriteString(` AND parent_id = ?`)
		args = append(args, f.Parent)
	}
	if f.Root != "" {
		q.WriteString(` AND root_id = ?`)
		args = append(args, f.Root)
	}
	if f.SpawnKey != "" {
		// The literal lets the partial index sessions_by_spawn_key serve it.
		q.WriteString(` AND spawn_key = ? AND spawn_key <> ''`)
		args = append(args, f.SpawnKey)
	}
	// Sorted keys keep the SQL text, and so SQLite's statement cache key,
	// stable for equal filters.
	keys := make([]string, 0, len(f.Labels))
	for k := range f.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.WriteString(` AND EXISTS (SELECT 1 FROM session_labels l WHERE l.session_id = sessions.id AND l.key = ? AND l.value = ?)`)
		args = append(args, k, f.Labels[k])
	}
	if f.Cursor != "" {
		at, id, err := codec.DecodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		q.WriteString(` AND (created_at, id) < (?, ?)`)
		args = append(args, at, id)
	}
	// One row more than asked tells whether there is a next page.
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ?`)
	args = append(args, limit+1)

	rows, err := s.r.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, internal(err, "list sessions")
	}
	defer rows.Close()
	page := &berth.SessionPage{}
	raws := make([]codec.RawSession, 0, min(limit, 64))
	var lastAt int64
	var lastID string
	for rows.Next() {
		if len(raws) == limit {
			page.NextCursor = codec.EncodeCursor(lastAt, lastID)
			break
		}
		var r codec.RawSession
		if err := rows.Scan(append([]any{&r.Doc, &r.LastSeq, &r.AgentOffset, &lastAt, &lastID}, r.Usage.Targets()...)...); err != nil {
			return nil, internal(err, "list sessions")
		}
		raws = append(raws, r)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "list sessions")
	}
	// Decoded once the rows are read, on every core for a long page.
	if page.Sessions, err = codec.DecodeSessions(raws); err != nil {
		return nil, err
	}
	return page, nil
}

// UpdateSession writes every field of sess except LastSeq and AgentOffset,
// which only AppendEvents moves. When from is not empty the stored state
// must equal it (EConflict otherwise). ENotFound if the session is absent.
func (s *Store) UpdateSession(ctx context.Context, sess *berth.Session, from berth.State) error {
	doc, err := codec.EncodeSession(sess)
	if err != nil {
		return err
	}
	tally, err := codec.TallyValues(sess)
	if err != nil {
		return err
	}
	// Prepared once: a session's record is written at each step of its
	// life, and parsing the statement was a fifth of each write.
	if err := s.stmtsReady(ctx); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		update := s.updateSession[0]
		args := append(append([]any{string(sess.State), sess.Agent, sess.ParentID, codec.SortNanos(sess.CreatedAt), doc, sess.ShimSocket}, tally...), sess.ID)
		if from != "" {
			update = s.updateSession[1]
			args = append(args, string(from))
		}
		res, err := tx.StmtContext(ctx, update).ExecContext(ctx, args...)
		if err != nil {
			return internal(err, "update session")
		}
		if n, err := res.RowsAffected(); err != nil {
			return internal(err, "update session")
		} else if n == 0 {
			return missOrConflict(ctx, tx, sess.ID, from)
		}
		if _, err := tx.StmtContext(ctx, s.deleteLabels).ExecContext(ctx, sess.ID); err != nil {
			return internal(err, "update session labels")
		}
		return insertLabels(ctx, tx, sess.ID, sess.Labels)
	})
}

// The statements of UpdateSession.
const (
	updateSessionSQL = `UPDATE sessions SET state = ?, agent = ?, parent_id = ?, created_at = ?, doc = ?, shim_socket = ?, ` + updateTallySQL + ` WHERE id = ?`
	updateFromSQL    = ` AND state = ?`
	deleteLabelsSQL  = `DELETE FROM session_labels WHERE session_id = ?`
)

// missOrConflict explains an UPDATE that matched no row: the session is
// gone (ENotFound) or its state is not the expected one (EConflict).
func missOrConflict(ctx context.Context, tx *sql.Tx, id string, from berth.State) error {
	var state string
	err := tx.QueryRowContext(ctx, `SELECT state FROM sessions WHERE id = ?`, id).Scan(&state)
	if err := codec.OneRow(err, "update session", "session %s not found", id); err != nil {
		return err
	}
	return codec.StateConflict(id, berth.State(state), from)
}

// DeleteSession removes a session, its labels, its whole log, its queue
// entries, permissions and lease in one transaction. ENotFound if absent.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var pk int64
		err := tx.QueryRowContext(ctx, `DELETE FROM sessions WHERE id = ? RETURNING pk`, id).Scan(&pk)
		if err := codec.OneRow(err, "delete session", "session %s not found", id); err != nil {
			return err
		}
		// Labels go by ON DELETE CASCADE; events have no foreign key (see
		// the schema) and go here, by a primary-key range.
		if _, err := tx.ExecContext(ctx, `DELETE FROM turns WHERE session_pk = ?`, pk); err != nil {
			return internal(err, "delete session")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE session_pk = ?`, pk); err != nil {
			return internal(err, "delete session events")
		}
		// The side tables have no foreign key either (migration 0003).
		for _, table := range []string{"queue_entries", "permissions", "elicitations", "leases"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE session_pk = ?`, pk); err != nil {
				return internal(err, "delete session %s", table)
			}
		}
		return nil
	})
}

// sessionPK returns the key of a session, read in tx. ENotFound if the
// session is absent.
func sessionPK(ctx context.Context, tx *sql.Tx, id string) (int64, error) {
	var pk int64
	err := tx.QueryRowContext(ctx, `SELECT pk FROM sessions WHERE id = ?`, id).Scan(&pk)
	if err := codec.OneRow(err, "find session", "session %s not found", id); err != nil {
		return 0, err
	}
	return pk, nil
}

// inTx runs fn in a write transaction and commits it if fn succeeds.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return internal(err, "begin transaction")
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return internal(err, "commit transaction")
	}
	s.checkpointer.notify()
	return nil
}

// inReadTx runs fn in a transaction on a reader connection, so that all of
// its statements read one snapshot, and then ends the transaction.
func (s *Store) inReadTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return internal(err, "begin read transaction")
	}
	// A read-only transaction has nothing to commit: rolling back ends it.
	defer tx.Rollback()
	return fn(tx)
}
