package sqlite

import (
	"context"
	"database/sql"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// elicitationOfSession selects one elicitation by session id and id.
const elicitationOfSession = `session_pk = (SELECT pk FROM sessions WHERE id = ?) AND id = ?`

// CreateElicitation stores an elicitation; an empty State is stored (and
// set on e) as pending. EInvalid without an id or session or for a schema
// that is not JSON; ENotFound if the session is absent; EConflict if an
// elicitation with that id exists (in any session).
func (s *Store) CreateElicitation(ctx context.Context, e *berth.Elicitation) error {
	c, doc, err := codec.NewElicitation(e)
	if err != nil {
		return err
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		pk, err := sessionPK(ctx, tx, e.SessionID)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO elicitations (session_pk, id, turn_id, state, doc) VALUES (?, ?, ?, ?, ?)`,
			pk, c.ID, c.TurnID, c.State, doc)
		if isConstraint(err) {
			return berth.WrapError(berth.EConflict, err, "elicitation %s already exists", e.ID)
		}
		if err != nil {
			return internal(err, "insert elicitation")
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.State = c.State
	return nil
}

// GetElicitation returns one elicitation of a session. ENotFound if the
// session is absent or has no elicitation with that id.
func (s *Store) GetElicitation(ctx context.Context, sessionID, id string) (*berth.Elicitation, error) {
	var doc []byte
	err := s.r.QueryRowContext(ctx, `SELECT doc FROM elicitations WHERE `+elicitationOfSession, sessionID, id).Scan(&doc)
	if err := codec.OneRow(err, "get elicitation", "session %s has no elicitation %s", sessionID, id); err != nil {
		return nil, err
	}
	return codec.DecodeElicitation(doc)
}

// ListElicitations returns a session's elicitations in state (all of them
// when state is empty) in the order they were created. ENotFound if the
// session is absent.
func (s *Store) ListElicitations(ctx context.Context, sessionID, state string) ([]*berth.Elicitation, error) {
	var out []*berth.Elicitation
	err := s.inReadTx(ctx, func(tx *sql.Tx) error {
		pk, err := sessionPK(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		// Two statements, so that the filtered one is a range of the index.
		q := `SELECT doc FROM elicitations WHERE session_pk = ? ORDER BY ord`
		args := []any{pk}
		if state != "" {
			q = `SELECT doc FROM elicitations WHERE session_pk = ? AND state = ? ORDER BY ord`
			args = append(args, state)
		}
		out, err = collect(ctx, tx, "list elicitations", q, args, func(row codec.Row) (*berth.Elicitation, error) {
			var doc []byte
			if err := row.Scan(&doc); err != nil {
				return nil, err
			}
			return codec.DecodeElicitation(doc)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ResolveElicitation records e's State, Action, Content, DecidedBy and
// ResolvedAt on a pending elicitation. EInvalid without ids or when
// e.State is empty or pending; ENotFound if absent; EConflict if it is no
// longer pending (its stored state is in the error's details).
func (s *Store) ResolveElicitation(ctx context.Context, e *berth.Elicitation) error {
	if err := codec.CheckResolution(e); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var doc []byte
		var state string
		err := tx.QueryRowContext(ctx, `SELECT doc, state FROM elicitations WHERE `+elicitationOfSession, e.SessionID, e.ID).Scan(&doc, &state)
		if err := codec.OneRow(err, "resolve elicitation", "session %s has no elicitation %s", e.SessionID, e.ID); err != nil {
			return err
		}
		if state != berth.ElicitationPending {
			return codec.ResolvedConflict(e.ID, state)
		}
		next, err := codec.Resolved(doc, e)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE elicitations SET state = ?, doc = ? WHERE `+elicitationOfSession,
			e.State, next, e.SessionID, e.ID); err != nil {
			return internal(err, "resolve elicitation")
		}
		return nil
	})
}
