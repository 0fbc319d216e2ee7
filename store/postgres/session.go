package postgres

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CreateSession inserts sess with its labels. EInvalid without an id,
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
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var pk int64
		err := tx.QueryRow(ctx, `INSERT INTO sessions (id, state, agent, parent_id, root_id, spawn_key, created_at, doc, shim_socket, `+codec.TallyColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING pk`,
			append([]any{sess.ID, string(sess.State), sess.Agent, sess.ParentID, codec.RootOf(sess), sess.SpawnKey,
				codec.SortNanos(sess.CreatedAt), doc, sess.ShimSocket}, tally...)...).Scan(&pk)
		if isUniqueViolation(err) {
			return berth.WrapError(berth.EConflict, err, "session %s already exists", sess.ID)
		}
		if err != nil {
			return internal(err, "insert session")
		}
		return insertLabels(ctx, tx, pk, sess)
	})
}

// insertLabels writes the label rows of a session in one statement, each
// with a copy of the session's list key (created_at, id) that label
// filtered lists page by (migration 0003).
func insertLabels(ctx context.Context, tx pgx.Tx, pk int64, sess *berth.Session) error {
	if len(sess.Labels) == 0 {
		return nil
	}
	keys := make([]string, 0, len(sess.Labels))
	values := make([]string, 0, len(sess.Labels))
	for k, v := range sess.Labels {
		keys, values = append(keys, k), append(values, v)
	}
	_, err := tx.Exec(ctx, `INSERT INTO session_labels (session_pk, key, value, created_at, session_id)
		SELECT $1, k, v, $4, $5 FROM unnest($2::text[], $3::text[]) AS l (k, v)`,
		pk, keys, values, codec.SortNanos(sess.CreatedAt), sess.ID)
	if err != nil {
		return internal(err, "insert session labels")
	}
	return nil
}

// GetSession returns one session. ENotFound if there is none.
func (s *Store) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	return codec.ScanSession(func(dest ...any) error {
		return s.queryRow(ctx, `SELECT `+codec.SessionColumns+` FROM sessions WHERE id = $1`, []any{id}, dest...)
	}, id)
}

// ListSessions returns a page of sessions, newest first (created_at, then
// id, descending), that match every given filter. Limit 0 means 50 and is
// capped at 1000. EInvalid for a malformed cursor or a negative limit.
func (s *Store) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	limit, err := codec.SessionLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	q, args, err := listSessionsSQL(f, limit)
	if err != nil {
		return nil, err
	}
	page := &berth.SessionPage{Sessions: make([]*berth.Session, 0, min(limit, 64))}
	var fds []pgconn.FieldDescription
	var lastAt int64
	var lastID []byte
	err = s.query(ctx, q, args, func(rows pgx.Rows) error {
		if len(page.Sessions) == limit {
			// The extra row: the cursor points after the last one returned.
			page.NextCursor = codec.EncodeCursor(lastAt, string(lastID))
			return nil
		}
		if fds == nil {
			fds = rows.FieldDescriptions()
		}
		// Columns: doc, last_seq, agent_offset, created_at, id, then the
		// usage. The document is decoded straight from the row buffer:
		// the decoder copies what it keeps.
		raw := rows.RawValues()
		lastSeq, err := rawInt8(fds[1], raw[1])
		if err != nil {
			return err
		}
		agentOffset, err := rawInt8(fds[2], raw[2])
		if err != nil {
			return err
		}
		if lastAt, err = rawInt8(fds[3], raw[3]); err != nil {
			return err
		}
		lastID = append(lastID[:0], raw[4]...)
		var u codec.UsageRow
		if err := rawUsage(fds, raw, 5, &u); err != nil {
			return err
		}
		sess, err := codec.DecodeSession(raw[0], lastSeq, agentOffset)
		if err != nil {
			return err
		}
		sess.Usage = u.Usage()
		page.Sessions = append(page.Sessions, sess)
		return nil
	})
	if err != nil {
		if berth.ErrorCode(err) == berth.EInternal {
			return nil, internal(err, "list sessions")
		}
		return nil, err
	}
	return page, nil
}

// listSessionsSQL builds the statement of a ListSessions page of at most
// limit sessions and its arguments; it asks for one row more, which tells
// whether there is a next page. EInvalid for a malformed cursor.
func listSessionsSQL(f berth.SessionFilter, limit int) (string, []any, error) {
	var q strings.Builder
	var args []any
	// arg binds v and returns its placeholder.
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	// Sorted keys keep the SQL text, and so pgx's statement cache key,
	// stable for equal filters.
	keys := make([]string, 0, len(f.Labels))
	for k := range f.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The list key the page is ordered and cut by: the session's own, or
	// with a label filter the copy in the first label's rows, so that the
	// page is one range of session_labels_by_pair whatever the planner's
	// statistics (migration 0003).
	at, id := `s.created_at`, `s.id`
	if len(keys) == 0 {
		q.WriteString(`SELECT s.doc, s.last_seq, s.agent_offset, s.created_at, s.id, ` + codec.UsageColumnsOf("s") + ` FROM sessions s WHERE true`)
	} else {
		at, id = `l.created_at`, `l.session_id`
		q.WriteString(`SELECT s.doc, s.last_seq, s.agent_offset, l.created_at, l.session_id, ` + codec.UsageColumnsOf("s") + `
			FROM session_labels l JOIN sessions s ON s.pk = l.session_pk
			WHERE l.key = ` + arg(keys[0]) + ` AND l.value = ` + arg(f.Labels[keys[0]]))
		keys = keys[1:]
	}
	if f.State != "" {
		q.WriteString(` AND s.state = ` + arg(string(f.State)))
	}
	if f.Agent != "" {
		q.WriteString(` AND s.agent = ` + arg(f.Agent))
	}
	if f.Parent != "" {
		q.WriteString(` AND s.parent_id = ` + arg(f.Parent))
	}
	if f.Root != "" {
		q.WriteString(` AND s.root_id = ` + arg(f.Root))
	}
	if f.SpawnKey != "" {
		// The literal lets the partial index sessions_by_spawn_key serve it.
		q.WriteString(` AND s.spawn_key = ` + arg(f.SpawnKey) + ` AND s.spawn_key <> ''`)
	}
	// Any further label is a probe of the primary key per candidate.
	for _, k := range keys {
		q.WriteString(` AND EXISTS (SELECT 1 FROM session_labels o WHERE o.session_pk = s.pk AND o.key = ` +
			arg(k) + ` AND o.value = ` + arg(f.Labels[k]) + `)`)
	}
	if f.Cursor != "" {
		cAt, cID, err := codec.DecodeCursor(f.Cursor)
		if err != nil {
			return "", nil, err
		}
		q.WriteString(` AND (` + at + `, ` + id + `) < (` + arg(cAt) + `, ` + arg(cID) + `)`)
	}
	// One row more than asked tells whether there is a next page.
	q.WriteString(` ORDER BY ` + at + ` DESC, ` + id + ` DESC LIMIT ` + arg(limit+1))
	return q.String(), args, nil
}

// UpdateSession writes every field of sess except LastSeq and AgentOffset,
// which only AppendEvents moves. When from is not empty the stored state
// must equal it (EConflict otherwise); the check is part of the UPDATE, so
// it holds against concurrent writers. ENotFound if the session is absent.
func (s *Store) UpdateSession(ctx context.Context, sess *berth.Session, from berth.State) error {
	doc, err := codec.EncodeSession(sess)
	if err != nil {
		return err
	}
	tally, err := codec.TallyValues(sess)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		q := `UPDATE sessions SET state = $1, agent = $2, parent_id = $3, created_at = $4, doc = $5, shim_socket = $6,
			stop_reason = $7, failed = $8, waiting = $9, auth_missing = $10, needs_auth = $11, max_cost = $12, max_tokens = $13
			WHERE id = $14`
		args := append(append([]any{string(sess.State), sess.Agent, sess.ParentID, codec.SortNanos(sess.CreatedAt), doc, sess.ShimSocket},
			tally...), sess.ID)
		if from != "" {
			q += ` AND state = $15`
			args = append(args, string(from))
		}
		var pk int64
		err := tx.QueryRow(ctx, q+` RETURNING pk`, args...).Scan(&pk)
		if errors.Is(err, pgx.ErrNoRows) {
			return missOrConflict(ctx, tx, sess.ID, from)
		}
		if err != nil {
			return internal(err, "update session")
		}
		// After the row lock: see the lock order at fenceSQL.
		if err := s.checkFence(ctx, tx, sess.ID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM session_labels WHERE session_pk = $1`, pk); err != nil {
			return internal(err, "update session labels")
		}
		return insertLabels(ctx, tx, pk, sess)
	})
}

// missOrConflict explains an UPDATE that matched no row: the session is
// gone (ENotFound) or its state is not the expected one (EConflict).
func missOrConflict(ctx context.Context, tx pgx.Tx, id string, from berth.State) error {
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM sessions WHERE id = $1`, id).Scan(&state)
	if err := codec.OneRow(err, "update session", "session %s not found", id); err != nil {
		return err
	}
	return codec.StateConflict(id, berth.State(state), from)
}

// DeleteSession removes a session, its labels, turns, whole log, queue
// entries, permissions and lease in one transaction. ENotFound if absent.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var pk int64
		err := tx.QueryRow(ctx, `DELETE FROM sessions WHERE id = $1 RETURNING pk`, id).Scan(&pk)
		if err := codec.OneRow(err, "delete session", "session %s not found", id); err != nil {
			return err
		}
		// Labels, queue entries, permissions and the lease go by ON DELETE
		// CASCADE (migrations 0001, 0002); turns and events have no foreign
		// key (see the schema) and go here, by primary-key ranges.
		if _, err := tx.Exec(ctx, `DELETE FROM turns WHERE session_pk = $1`, pk); err != nil {
			return internal(err, "delete session turns")
		}
		if _, err := tx.Exec(ctx, `DELETE FROM events WHERE session_pk = $1`, pk); err != nil {
			return internal(err, "delete session events")
		}
		return nil
	})
	if err == nil {
		// Its lease went with it.
		s.fence.Dropped(id)
	}
	return err
}
