package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

// permissionCols are the columns scanPermission reads, in its order.
const permissionCols = `id, turn_id, tool_call, options, state, option_id, decided_by, created_at, decided_at`

// decidePermissionSQL records a decision on a pending permission in one
// statement. target locks the row (waiting for a concurrent decider and
// then seeing its result), the UPDATE applies only while it is pending,
// and the answer tells a missing permission (no row) from one that was no
// longer pending (decided false).
const decidePermissionSQL = `WITH target AS (
    SELECT ord, state FROM permissions
    WHERE id = $2 AND session_pk = (SELECT pk FROM sessions WHERE id = $1)
    FOR UPDATE),
decided AS (
    UPDATE permissions SET state = $3, option_id = $4, decided_by = $5, decided_at = $6
    FROM target WHERE permissions.ord = target.ord AND target.state = 'pending'
    RETURNING 1)
SELECT target.state, EXISTS (SELECT 1 FROM decided) FROM target`

// CreatePermission stores a permission request (a pending one when
// p.State is empty, which it then sets). EInvalid without an id or
// session, ENotFound if the session is absent, EConflict if the id exists.
func (s *Store) CreatePermission(ctx context.Context, p *berth.Permission) error {
	if p == nil || p.ID == "" || p.SessionID == "" {
		return berth.Errorf(berth.EInvalid, "permission needs an id and a session id")
	}
	state := p.State
	if state == "" {
		state = berth.PermissionPending
	}
	options, err := json.Marshal(p.Options)
	if err != nil {
		return berth.WrapError(berth.EInvalid, err, "permission options cannot be encoded")
	}
	created, err := codec.NanosArg(p.CreatedAt, "permission time")
	if err != nil {
		return err
	}
	var decided any
	if p.DecidedAt != nil {
		if decided, err = codec.NanosArg(*p.DecidedAt, "permission decision time"); err != nil {
			return err
		}
	}
	// Keep the tool call's JSON as given; NULL when there is none.
	var toolCall any
	if p.ToolCall != nil {
		toolCall = string(p.ToolCall)
	}
	// The session's key comes from the same statement: no row inserted
	// means no such session.
	var ord int64
	err = s.fenced(ctx, p.SessionID, func(q querier) error {
		return q.QueryRow(ctx, `INSERT INTO permissions
		(id, session_pk, turn_id, tool_call, options, state, option_id, decided_by, created_at, decided_at)
		SELECT $1, pk, $3, $4, $5, $6, $7, $8, $9, $10 FROM sessions WHERE id = $2
		RETURNING ord`,
			p.ID, p.SessionID, p.TurnID, toolCall, string(options), state, p.OptionID, p.DecidedBy, created, decided).Scan(&ord)
	})
	switch {
	case isBerthError(err):
		return err
	case errors.Is(err, pgx.ErrNoRows), isForeignKeyViolation(err):
		// A foreign key violation: the session was deleted meanwhile.
		return berth.Errorf(berth.ENotFound, "session %s not found", p.SessionID)
	case isUniqueViolation(err):
		return berth.WrapError(berth.EConflict, err, "permission %s already exists", p.ID)
	case err != nil:
		return internal(err, "insert permission")
	}
	p.State = state
	return nil
}

// GetPermission returns one permission of a session. ENotFound if the
// session has no permission with that id.
func (s *Store) GetPermission(ctx context.Context, sessionID, id string) (*berth.Permission, error) {
	var p *berth.Permission
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		row := c.QueryRow(ctx, `SELECT `+permissionCols+` FROM permissions
			WHERE id = $2 AND session_pk = (SELECT pk FROM sessions WHERE id = $1)`, sessionID, id)
		var err error
		p, err = scanPermission(row, sessionID)
		return err
	})
	if err := codec.OneRow(err, "get permission", "permission %s not found", id); err != nil {
		return nil, err
	}
	return p, nil
}

// ListPermissions returns a session's permissions in state (all of them
// when state is empty), oldest first. ENotFound if the session is absent.
func (s *Store) ListPermissions(ctx context.Context, sessionID, state string) ([]*berth.Permission, error) {
	// state = $2 OR $2 = '': one statement for "any state" and one state.
	return collectOfSession(ctx, s, sessionID, "list permissions", `SELECT `+permissionCols+` FROM permissions
		WHERE session_pk = (SELECT pk FROM sessions WHERE id = $1) AND (state = $2 OR $2 = '')
		ORDER BY ord`, []any{sessionID, state}, func(row codec.Row) (*berth.Permission, error) {
		return scanPermission(row, sessionID)
	})
}

// DecidePermission records p's State, OptionID, DecidedBy and DecidedAt on
// a pending permission, atomically against concurrent deciders. EInvalid
// when p.State is empty or pending, EConflict if the permission is no
// longer pending, ENotFound if the session has no permission p.ID.
func (s *Store) DecidePermission(ctx context.Context, p *berth.Permission) error {
	if p == nil || p.ID == "" {
		return berth.Errorf(berth.EInvalid, "permission id must not be empty")
	}
	if p.State == "" || p.State == berth.PermissionPending {
		return berth.Errorf(berth.EInvalid, "a decision must move permission %s out of pending", p.ID)
	}
	var decided any
	if p.DecidedAt != nil {
		var err error
		if decided, err = codec.NanosArg(*p.DecidedAt, "permission decision time"); err != nil {
			return err
		}
	}
	var was string
	var ok bool
	err := s.fenced(ctx, p.SessionID, func(q querier) error {
		return q.QueryRow(ctx, decidePermissionSQL, p.SessionID, p.ID, p.State, p.OptionID, p.DecidedBy, decided).Scan(&was, &ok)
	})
	if isBerthError(err) {
		return err
	}
	if err := codec.OneRow(err, "decide permission", "permission %s not found", p.ID); err != nil {
		return err
	}
	if !ok {
		return &berth.Error{Code: berth.EConflict, Message: "permission " + p.ID + " is " + was + ", not pending",
			Details: map[string]any{"state": was}}
	}
	return nil
}

// scanPermission reads the permissionCols of one row.
func scanPermission(row codec.Row, sessionID string) (*berth.Permission, error) {
	p := &berth.Permission{SessionID: sessionID}
	var toolCall *string
	var options string
	var created, decided *int64
	if err := row.Scan(&p.ID, &p.TurnID, &toolCall, &options, &p.State, &p.OptionID, &p.DecidedBy, &created, &decided); err != nil {
		return nil, err
	}
	if toolCall != nil {
		p.ToolCall = json.RawMessage(*toolCall)
	}
	if err := json.Unmarshal([]byte(options), &p.Options); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "decode stored permission options")
	}
	p.CreatedAt = codec.FromNullNanos(created)
	if decided != nil {
		t := codec.FromNullNanos(decided)
		p.DecidedAt = &t
	}
	return p, nil
}
