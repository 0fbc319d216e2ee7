package postgres

import (
	"context"
	"errors"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

// CreateElicitation stores an elicitation (a pending one when e.State is
// empty, which it then sets). EInvalid without an id or session or for a
// schema that is not JSON, ENotFound if the session is absent, EConflict
// if the id exists.
func (s *Store) CreateElicitation(ctx context.Context, e *berth.Elicitation) error {
	c, doc, err := codec.NewElicitation(e)
	if err != nil {
		return err
	}
	// The session's key comes from the same statement: no row inserted
	// means no such session.
	var ord int64
	err = s.fenced(ctx, c.SessionID, func(q querier) error {
		return q.QueryRow(ctx, `INSERT INTO elicitations (id, session_pk, turn_id, state, doc)
		SELECT $1, pk, $3, $4, $5 FROM sessions WHERE id = $2
		RETURNING ord`, c.ID, c.SessionID, c.TurnID, c.State, doc).Scan(&ord)
	})
	switch {
	case isBerthError(err):
		return err
	case errors.Is(err, pgx.ErrNoRows), isForeignKeyViolation(err):
		return berth.Errorf(berth.ENotFound, "session %s not found", e.SessionID)
	case isUniqueViolation(err):
		return berth.WrapError(berth.EConflict, err, "elicitation %s already exists", e.ID)
	case err != nil:
		return internal(err, "insert elicitation")
	}
	e.State = c.State
	return nil
}

// GetElicitation returns one elicitation of a session. ENotFound if the
// session has no elicitation with that id.
func (s *Store) GetElicitation(ctx context.Context, sessionID, id string) (*berth.Elicitation, error) {
	var doc string
	err := s.queryRow(ctx, `SELECT doc FROM elicitations
		WHERE id = $2 AND session_pk = (SELECT pk FROM sessions WHERE id = $1)`, []any{sessionID, id}, &doc)
	if err := codec.OneRow(err, "get elicitation", "session %s has no elicitation %s", sessionID, id); err != nil {
		return nil, err
	}
	return codec.DecodeElicitation([]byte(doc))
}

// ListElicitations returns a session's elicitations in state (all of them
// when state is empty), oldest first. ENotFound if the session is absent.
func (s *Store) ListElicitations(ctx context.Context, sessionID, state string) ([]*berth.Elicitation, error) {
	return collectOfSession(ctx, s, sessionID, "list elicitations", `SELECT doc FROM elicitations
		WHERE session_pk = (SELECT pk FROM sessions WHERE id = $1) AND (state = $2 OR $2 = '')
		ORDER BY ord`, []any{sessionID, state}, func(row codec.Row) (*berth.Elicitation, error) {
		var doc []byte
		if err := row.Scan(&doc); err != nil {
			return nil, err
		}
		return codec.DecodeElicitation(doc)
	})
}

// ResolveElicitation records e's State, Action, Content, DecidedBy and
// ResolvedAt on a pending elicitation; the row is locked while it is read
// and written, so of two resolvers one wins and the other gets EConflict.
// EInvalid when e.State is empty or pending, ENotFound if absent.
func (s *Store) ResolveElicitation(ctx context.Context, e *berth.Elicitation) error {
	if err := codec.CheckResolution(e); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.checkFence(ctx, tx, e.SessionID); err != nil {
			return err
		}
		var doc, state string
		var ord int64
		err := tx.QueryRow(ctx, `SELECT ord, state, doc FROM elicitations
			WHERE id = $2 AND session_pk = (SELECT pk FROM sessions WHERE id = $1) FOR UPDATE`,
			e.SessionID, e.ID).Scan(&ord, &state, &doc)
		if err := codec.OneRow(err, "resolve elicitation", "session %s has no elicitation %s", e.SessionID, e.ID); err != nil {
			return err
		}
		if state != berth.ElicitationPending {
			return codec.ResolvedConflict(e.ID, state)
		}
		next, err := codec.Resolved([]byte(doc), e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE elicitations SET state = $2, doc = $3 WHERE ord = $1`, ord, e.State, next); err != nil {
			return internal(err, "resolve elicitation")
		}
		return nil
	})
}
