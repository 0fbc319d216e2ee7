package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// permissionCopy returns a deep copy of p.
func permissionCopy(p *berth.Permission) *berth.Permission {
	c := *p
	c.ToolCall = bytes.Clone(p.ToolCall)
	c.Options = slices.Clone(p.Options)
	if p.DecidedAt != nil {
		at := *p.DecidedAt
		c.DecidedAt = &at
	}
	return &c
}

// checkTime is EInvalid when t is set but out of the range the SQL stores
// keep; what names it.
func checkTime(t time.Time, what string) error {
	if _, ok := codec.ToNanos(t); !ok && !t.IsZero() {
		return berth.Errorf(berth.EInvalid, "%s out of range", what)
	}
	return nil
}

// storedDecidedAt is a decision time as stored: nil for none, and a zero
// time stored as none, as in the SQL stores.
func storedDecidedAt(t *time.Time) *time.Time {
	if t == nil || t.IsZero() {
		return nil
	}
	at := storedTime(*t)
	return &at
}

// CreatePermission stores a copy of a permission request; an empty State
// is stored (and set on p) as pending. EInvalid without an id or session,
// for a tool call that is not JSON or a time out of range; ENotFound if
// the session is absent; EConflict if a permission with that id exists (in
// any session).
func (s *Store) CreatePermission(ctx context.Context, p *berth.Permission) error {
	if p == nil || p.ID == "" || p.SessionID == "" {
		return berth.Errorf(berth.EInvalid, "permission needs an id and a session id")
	}
	// The tool call is given back as raw JSON, so it has to be JSON.
	if p.ToolCall != nil && !json.Valid(p.ToolCall) {
		return berth.Errorf(berth.EInvalid, "permission tool call is not JSON")
	}
	if err := checkTime(p.CreatedAt, "permission created_at"); err != nil {
		return err
	}
	if p.DecidedAt != nil {
		if err := checkTime(*p.DecidedAt, "permission decided_at"); err != nil {
			return err
		}
	}
	state := p.State
	if state == "" {
		state = berth.PermissionPending
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(p.SessionID)
	if err != nil {
		return err
	}
	if err := s.fenced(p.SessionID); err != nil {
		return err
	}
	if _, ok := s.permIDs[p.ID]; ok {
		return berth.Errorf(berth.EConflict, "permission %s already exists", p.ID)
	}
	c := permissionCopy(p)
	c.State = state
	c.CreatedAt = storedTime(p.CreatedAt)
	c.DecidedAt = storedDecidedAt(p.DecidedAt)
	r.perms = append(r.perms, c)
	s.permIDs[p.ID] = p.SessionID
	p.State = state
	return nil
}

// permission returns the stored permission id of a session, nil if there
// is none.
func (st *state) permission(sessionID, id string) *berth.Permission {
	r, ok := st.sessions[sessionID]
	if !ok {
		return nil
	}
	for _, p := range r.perms {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// GetPermission returns a copy of one permission of a session. ENotFound
// if the session is absent or has no permission with that id.
func (s *Store) GetPermission(ctx context.Context, sessionID, id string) (*berth.Permission, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := s.permission(sessionID, id)
	if p == nil {
		return nil, berth.Errorf(berth.ENotFound, "session %s has no permission %s", sessionID, id)
	}
	return permissionCopy(p), nil
}

// ListPermissions returns copies of a session's permissions in state (all
// of them when state is empty) in the order they were created. ENotFound
// if the session is absent.
func (s *Store) ListPermissions(ctx context.Context, sessionID, state string) ([]*berth.Permission, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, err := s.lookup(sessionID)
	if err != nil {
		return nil, err
	}
	out := []*berth.Permission{}
	for _, p := range r.perms {
		if state == "" || p.State == state {
			out = append(out, permissionCopy(p))
		}
	}
	return out, nil
}

// DecidePermission records p's State, OptionID, DecidedBy and DecidedAt on
// a pending permission. EInvalid without ids, when p.State is empty or
// pending, or for a time out of range; ENotFound if the permission is
// absent; EConflict if it is no longer pending (its stored state is in the
// error's details).
func (s *Store) DecidePermission(ctx context.Context, p *berth.Permission) error {
	if err := codec.CheckDecision(p); err != nil {
		return err
	}
	if p.DecidedAt != nil {
		if err := checkTime(*p.DecidedAt, "permission decided_at"); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(p.SessionID); err != nil {
		return err
	}
	stored := s.permission(p.SessionID, p.ID)
	switch {
	case stored == nil:
		return berth.Errorf(berth.ENotFound, "session %s has no permission %s", p.SessionID, p.ID)
	case stored.State != berth.PermissionPending:
		return &berth.Error{Code: berth.EConflict,
			Message: "permission " + p.ID + " is " + stored.State + ", not " + berth.PermissionPending,
			Details: map[string]any{"state": stored.State, "expected": berth.PermissionPending}}
	}
	stored.State, stored.OptionID, stored.DecidedBy = p.State, p.OptionID, p.DecidedBy
	stored.DecidedAt = storedDecidedAt(p.DecidedAt)
	return nil
}
