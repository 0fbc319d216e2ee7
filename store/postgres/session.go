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
)

// Session list bounds.
const (
	defaultSessionLimit = 50
	maxSessionLimit     = 1000
)

// CreateSession inserts sess with its labels. EInvalid without an id,
// EConflict if the id exists.
func (s *Store) CreateSession(ctx context.Context, sess *berth.Session) error {
	if sess == nil || sess.ID == "" {
		return berth.Errorf(berth.EInvalid, "session id must not be empty")
	}
	doc, err := codec.EncodeSession(sess)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var pk int64
		err := tx.QueryRow(ctx, `INSERT INTO sessions (id, state, agent, parent_id, created_at, doc)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING pk`,
			sess.ID, string(sess.State), sess.Agent, sess.ParentID, codec.SortNanos(sess.CreatedAt), doc).Scan(&pk)
		if isUniqueViolation(err) {
			return berth.WrapError(berth.EConflict, err, "session %s already exists", sess.ID)
		}
		if err != nil {
			return internal(err, "insert session")
		}
		return insertLabels(ctx, tx, pk, sess.Labels)
	})
}

// insertLabels writes the label rows of a session in one statement.
func insertLabels(ctx context.Context, tx pgx.Tx, pk int64, labels map[string]string) error {
	if len(labels) == 0 {
		return nil
	}
	keys := make([]string, 0, len(labels))
	values := make([]string, 0, len(labels))
	for k, v := range labels {
		keys, values = append(keys, k), append(values, v)
	}
	_, err := tx.Exec(ctx, `INSERT INTO session_labels (session_pk, key, value)
		SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS l (k, v)`, pk, keys, values)
	if err != nil {
		return internal(err, "insert session labels")
	}
	return nil
}

// GetSession returns one session. ENotFound if there is none.
func (s *Store) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	var doc []byte
	var lastSeq int64
	err := s.queryRow(ctx, `SELECT doc, last_seq FROM sessions WHERE id = $1`, []any{id}, &doc, &lastSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	if err != nil {
		return nil, internal(err, "get session")
	}
	return codec.DecodeSession(doc, lastSeq)
}

// ListSessions returns a page of sessions, newest first (created_at, then
// id, descending), that match every given filter. Limit 0 means 50 and is
// capped at 1000. EInvalid for a malformed cursor or a negative limit.
func (s *Store) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	limit := f.Limit
	switch {
	case limit < 0:
		return nil, berth.Errorf(berth.EInvalid, "limit must not be negative")
	case limit == 0:
		limit = defaultSessionLimit
	case limit > maxSessionLimit:
		limit = maxSessionLimit
	}
	var q strings.Builder
	var args []any
	// arg binds v and returns its placeholder.
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	q.WriteString(`SELECT doc, last_seq, created_at, id FROM sessions WHERE true`)
	if f.State != "" {
		q.WriteString(` AND state = ` + arg(string(f.State)))
	}
	if f.Agent != "" {
		q.WriteString(` AND agent = ` + arg(f.Agent))
	}
	if f.Parent != "" {
		q.WriteString(` AND parent_id = ` + arg(f.Parent))
	}
	// Sorted keys keep the SQL text, and so pgx's statement cache key,
	// stable for equal filters.
	keys := make([]string, 0, len(f.Labels))
	for k := range f.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q.WriteString(` AND EXISTS (SELECT 1 FROM session_labels l WHERE l.session_pk = sessions.pk AND l.key = ` +
			arg(k) + ` AND l.value = ` + arg(f.Labels[k]) + `)`)
	}
	if f.Cursor != "" {
		at, id, err := codec.DecodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		q.WriteString(` AND (created_at, id) < (` + arg(at) + `, ` + arg(id) + `)`)
	}
	// One row more than asked tells whether there is a next page.
	q.WriteString(` ORDER BY created_at DESC, id DESC LIMIT ` + arg(limit+1))

	page := &berth.SessionPage{Sessions: make([]*berth.Session, 0, min(limit, 64))}
	var lastAt int64
	var lastID string
	err := s.query(ctx, q.String(), args, func(rows pgx.Rows) error {
		if len(page.Sessions) == limit {
			// The extra row: the cursor points after the last one returned.
			page.NextCursor = codec.EncodeCursor(lastAt, lastID)
			return nil
		}
		var doc []byte
		var lastSeq int64
		if err := rows.Scan(&doc, &lastSeq, &lastAt, &lastID); err != nil {
			return err
		}
		sess, err := codec.DecodeSession(doc, lastSeq)
		if err != nil {
			return err
		}
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

// UpdateSession writes every field of sess except LastSeq. When from is not
// empty the stored state must equal it (EConflict otherwise); the check is
// part of the UPDATE, so it holds against concurrent writers. ENotFound if
// the session is absent.
func (s *Store) UpdateSession(ctx context.Context, sess *berth.Session, from berth.State) error {
	if sess == nil || sess.ID == "" {
		return berth.Errorf(berth.EInvalid, "session id must not be empty")
	}
	doc, err := codec.EncodeSession(sess)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		q := `UPDATE sessions SET state = $1, agent = $2, parent_id = $3, created_at = $4, doc = $5 WHERE id = $6`
		args := []any{string(sess.State), sess.Agent, sess.ParentID, codec.SortNanos(sess.CreatedAt), doc, sess.ID}
		if from != "" {
			q += ` AND state = $7`
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
		if _, err := tx.Exec(ctx, `DELETE FROM session_labels WHERE session_pk = $1`, pk); err != nil {
			return internal(err, "update session labels")
		}
		return insertLabels(ctx, tx, pk, sess.Labels)
	})
}

// missOrConflict explains an UPDATE that matched no row: the session is
// gone (ENotFound) or its state is not the expected one (EConflict).
func missOrConflict(ctx context.Context, tx pgx.Tx, id string, from berth.State) error {
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM sessions WHERE id = $1`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	if err != nil {
		return internal(err, "update session")
	}
	return &berth.Error{Code: berth.EConflict,
		Message: "session " + id + " is " + state + ", not " + string(from),
		Details: map[string]any{"state": state, "expected": string(from)}}
}

// DeleteSession removes a session, its labels, turns and whole log in one
// transaction. ENotFound if absent.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var pk int64
		err := tx.QueryRow(ctx, `DELETE FROM sessions WHERE id = $1 RETURNING pk`, id).Scan(&pk)
		if errors.Is(err, pgx.ErrNoRows) {
			return berth.Errorf(berth.ENotFound, "session %s not found", id)
		}
		if err != nil {
			return internal(err, "delete session")
		}
		// Labels go by ON DELETE CASCADE; turns and events have no foreign
		// key (see the schema) and go here, by primary-key ranges.
		if _, err := tx.Exec(ctx, `DELETE FROM turns WHERE session_pk = $1`, pk); err != nil {
			return internal(err, "delete session turns")
		}
		if _, err := tx.Exec(ctx, `DELETE FROM events WHERE session_pk = $1`, pk); err != nil {
			return internal(err, "delete session events")
		}
		return nil
	})
}
