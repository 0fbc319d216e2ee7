package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// permissionColumns are the columns of a permission that scanPermission
// reads, in its order.
const permissionColumns = `id, turn_id, state, tool_call, options, option_id, decided_by, created_at, decided_at`

// permissionOfSession selects one permission by session id and permission id.
const permissionOfSession = `session_pk = (SELECT pk FROM sessions WHERE id = ?) AND id = ?`

// scanPermission reads the permissionColumns of one row of sessionID.
// EInternal for stored options that do not decode.
func scanPermission(sc codec.Row, sessionID string) (*berth.Permission, error) {
	p := &berth.Permission{SessionID: sessionID}
	var toolCall, options []byte
	var created, decided *int64
	if err := sc.Scan(&p.ID, &p.TurnID, &p.State, &toolCall, &options, &p.OptionID, &p.DecidedBy, &created, &decided); err != nil {
		return nil, err
	}
	// A NULL tool_call scans as nil, which is what was stored.
	p.ToolCall = toolCall
	if err := json.Unmarshal(options, &p.Options); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "decode stored permission options")
	}
	p.CreatedAt = codec.FromNullNanos(created)
	if decided != nil {
		at := codec.FromNanos(*decided)
		p.DecidedAt = &at
	}
	return p, nil
}

// decidedAtArg is the stored form of a permission's decision time.
// EInvalid for a time out of range.
func decidedAtArg(p *berth.Permission) (any, error) {
	if p.DecidedAt == nil {
		return nil, nil
	}
	return codec.NanosArg(*p.DecidedAt, "permission decided_at")
}

// CreatePermission stores a permission request; an empty State is stored
// (and set on p) as pending. EInvalid without an id or session or for a
// tool call that is not JSON; ENotFound if the session is absent;
// EConflict if a permission with that id exists (in any session).
func (s *Store) CreatePermission(ctx context.Context, p *berth.Permission) error {
	if p == nil || p.ID == "" || p.SessionID == "" {
		return berth.Errorf(berth.EInvalid, "permission needs an id and a session id")
	}
	// The tool call is given back as raw JSON, so it has to be JSON.
	var toolCall any
	if p.ToolCall != nil {
		if !json.Valid(p.ToolCall) {
			return berth.Errorf(berth.EInvalid, "permission tool call is not JSON")
		}
		toolCall = string(p.ToolCall)
	}
	options, err := json.Marshal(p.Options)
	if err != nil {
		return berth.WrapError(berth.EInvalid, err, "permission options cannot be encoded")
	}
	created, err := codec.NanosArg(p.CreatedAt, "permission created_at")
	if err != nil {
		return err
	}
	decided, err := decidedAtArg(p)
	if err != nil {
		return err
	}
	state := p.State
	if state == "" {
		state = berth.PermissionPending
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		pk, err := sessionPK(ctx, tx, p.SessionID)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO permissions
			(session_pk, id, turn_id, state, tool_call, options, option_id, decided_by, created_at, decided_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			pk, p.ID, p.TurnID, state, toolCall, string(options), p.OptionID, p.DecidedBy, created, decided)
		if isConstraint(err) {
			return berth.WrapError(berth.EConflict, err, "permission %s already exists", p.ID)
		}
		if err != nil {
			return internal(err, "insert permission")
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.State = state
	return nil
}

// GetPermission returns one permission of a session. ENotFound if the
// session is absent or has no permission with that id.
func (s *Store) GetPermission(ctx context.Context, sessionID, id string) (*berth.Permission, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+permissionColumns+` FROM permissions WHERE `+permissionOfSession, sessionID, id)
	p, err := scanPermission(row, sessionID)
	if err := codec.OneRow(err, "get permission", "session %s has no permission %s", sessionID, id); err != nil {
		return nil, err
	}
	return p, nil
}

// ListPermissions returns a session's permissions in state (all of them
// when state is empty) in the order they were created. ENotFound if the
// session is absent.
func (s *Store) ListPermissions(ctx context.Context, sessionID, state string) ([]*berth.Permission, error) {
	var out []*berth.Permission
	err := s.inReadTx(ctx, func(tx *sql.Tx) error {
		pk, err := sessionPK(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		// Two statements rather than "state = ? OR ? = ''", so that the
		// filtered one is a range of permissions_by_state.
		q := `SELECT ` + permissionColumns + ` FROM permissions WHERE session_pk = ? ORDER BY ord`
		args := []any{pk}
		if state != "" {
			q = `SELECT ` + permissionColumns + ` FROM permissions WHERE session_pk = ? AND state = ? ORDER BY ord`
			args = append(args, state)
		}
		out, err = collect(ctx, tx, "list permissions", q, args, func(row codec.Row) (*berth.Permission, error) {
			return scanPermission(row, sessionID)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DecidePermission records p's State, OptionID, DecidedBy and DecidedAt on
// a pending permission. EInvalid without ids or when p.State is empty or
// pending; ENotFound if the permission is absent; EConflict if it is no
// longer pending (its stored state is in the error's details).
func (s *Store) DecidePermission(ctx context.Context, p *berth.Permission) error {
	if err := codec.CheckDecision(p); err != nil {
		return err
	}
	decided, err := decidedAtArg(p)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE permissions SET state = ?, option_id = ?, decided_by = ?, decided_at = ?
			WHERE `+permissionOfSession+` AND state = ?`,
			p.State, p.OptionID, p.DecidedBy, decided, p.SessionID, p.ID, berth.PermissionPending)
		if err != nil {
			return internal(err, "decide permission")
		}
		if n, err := res.RowsAffected(); err != nil {
			return internal(err, "decide permission")
		} else if n > 0 {
			return nil
		}
		// Nothing matched: the permission is gone or no longer pending.
		var state string
		err = tx.QueryRowContext(ctx, `SELECT state FROM permissions WHERE `+permissionOfSession, p.SessionID, p.ID).Scan(&state)
		if err := codec.OneRow(err, "decide permission", "session %s has no permission %s", p.SessionID, p.ID); err != nil {
			return err
		}
		return &berth.Error{Code: berth.EConflict,
			Message: "permission " + p.ID + " is " + state + ", not " + berth.PermissionPending,
			Details: map[string]any{"state": state, "expected": berth.PermissionPending}}
	})
}
