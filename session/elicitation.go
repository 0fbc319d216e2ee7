package session

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/elicitschema"

	live "github.com/berth-sh/berth/session/live"
)

// cancelStoredElicitation records a stored pending elicitation cancelled.
func (rc *recovery) cancelStoredElicitation(ctx context.Context, e *berth.Elicitation) {
	now := time.Now().UTC()
	e.State, e.Action, e.DecidedBy, e.ResolvedAt = berth.ElicitationCancelled, berth.ElicitationCancel, berth.DecidedByCancel, &now
	if err := rc.m.store.ResolveElicitation(ctx, e); err != nil && !berth.IsCode(err, berth.EConflict) {
		rc.m.logger.Warn("cancel a stale elicitation", "err", err)
	}
}

// reconcileElicitations cancels the pending elicitations of a session
// whose agent died with the daemon, logging them resolved (tagged with
// the open turn when they belong to it) unless the log is closed already.
func (rc *recovery) reconcileElicitations(ctx context.Context, s *berth.Session, open string, ended bool) error {
	pending, err := rc.m.store.ListElicitations(ctx, s.ID, berth.ElicitationPending)
	if err != nil {
		return err
	}
	for _, e := range pending {
		rc.cancelStoredElicitation(ctx, e)
		if ended {
			continue
		}
		tag := ""
		if e.TurnID == open {
			tag = open
		}
		if _, err := rc.m.log.AppendSync(ctx, berth.NewEvent(s.ID, tag, berth.EventElicitationResolved,
			live.ElicResolvedData{ElicitationID: e.ID, Action: berth.ElicitationCancel, DecidedBy: berth.DecidedByCancel})); err != nil {
			return err
		}
	}
	s.PendingElicitations = 0
	return nil
}

// ListElicitations implements berth.SessionService.
func (m *Manager) ListElicitations(ctx context.Context, id, state string) ([]*berth.Elicitation, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	switch state {
	case "", berth.ElicitationPending, berth.ElicitationAccepted, berth.ElicitationDeclined, berth.ElicitationCancelled:
	default:
		return nil, berth.Errorf(berth.EInvalid, "state must be one of pending, accepted, declined, cancelled")
	}
	return m.store.ListElicitations(ctx, id, state)
}

// GetElicitation implements berth.SessionService.
func (m *Manager) GetElicitation(ctx context.Context, id, eid string) (*berth.Elicitation, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	return m.store.GetElicitation(ctx, id, eid)
}

// AnswerElicitation implements berth.SessionService: the answer is checked
// against the agent's schema before the agent hears it.
func (m *Manager) AnswerElicitation(ctx context.Context, id, eid string, a berth.ElicitationAnswer) (*berth.Elicitation, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	e, err := m.store.GetElicitation(ctx, id, eid)
	if err != nil {
		return nil, err
	}
	if e.State != berth.ElicitationPending {
		return nil, &berth.Error{Code: berth.EConflict, Message: "elicitation " + eid + " is already " + e.State,
			Details: map[string]any{"state": e.State, "decided_by": e.DecidedBy}}
	}
	if a.Action == berth.ElicitationAccept {
		switch e.Mode {
		case berth.ElicitationModeURL:
			if len(a.Content) > 0 {
				return nil, berth.Errorf(berth.EInvalid, "a url elicitation is accepted without content")
			}
		default:
			form, err := elicitschema.Parse(e.RequestedSchema)
			if err != nil {
				return nil, err
			}
			if a.Content == nil {
				a.Content = map[string]any{}
			}
			if err := form.Check(a.Content); err != nil {
				return nil, err
			}
		}
	}
	ls := m.set.liveOf(id)
	if ls == nil {
		return nil, berth.Errorf(berth.EConflict, "elicitation %s is not awaiting an answer: the session is stopped", eid)
	}
	return ls.ResolveElicitation(context.WithoutCancel(ctx), eid, a.Action, a.Content, berth.DecidedByUser)
}
