package session

import (
	"context"

	"github.com/berth-sh/berth"
)

// ListPermissions implements berth.SessionService.
func (m *Manager) ListPermissions(ctx context.Context, id, state string) ([]*berth.Permission, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	switch state {
	case "", berth.PermissionPending, berth.PermissionDecided, berth.PermissionExpired, berth.PermissionCanceled:
	default:
		return nil, berth.Errorf(berth.EInvalid, "state must be one of pending, decided, expired, canceled")
	}
	ps, err := m.store.ListPermissions(ctx, id, state)
	if ps == nil && err == nil {
		ps = []*berth.Permission{}
	}
	return ps, err
}

// DecidePermission implements berth.SessionService.
func (m *Manager) DecidePermission(ctx context.Context, id, permID string, d berth.PermissionDecision) (*berth.Permission, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	p, err := m.store.GetPermission(ctx, id, permID)
	if err != nil {
		return nil, err
	}
	if p.State != berth.PermissionPending {
		return nil, &berth.Error{Code: berth.EConflict, Message: "permission " + permID + " is already " + p.State,
			Details: map[string]any{"state": p.State, "decided_by": p.DecidedBy}}
	}
	opt, err := d.Option(p)
	if err != nil {
		return nil, err
	}
	ls := m.set.liveOf(id)
	if ls == nil {
		return nil, berth.Errorf(berth.EConflict, "permission %s is not awaiting a decision: the session is stopped", permID)
	}
	return ls.Decide(context.WithoutCancel(ctx), permID, berth.PermissionDecided, opt.ID, berth.DecidedByUser)
}
