package session

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
)

// PatchSession implements berth.SessionService (docs/api.md, "Agent controls"). Everything
// is checked before anything is applied; then name, labels and budgets, the mode,
// the model and the config options (by id) are applied in that order, and
// an agent failure part-way says which fields were applied. A change of
// a budget takes effect at the next model call (usage.go).
func (m *Manager) PatchSession(ctx context.Context, id string, p berth.SessionPatch) (*berth.Session, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.MaxCostUSD == nil && p.MaxTokens == nil {
		return m.patch(ctx, id, p)
	}
	before, err := m.usage.spendOf(ctx, id)
	if err != nil {
		return nil, err
	}
	s, err := m.patch(ctx, id, p)
	if err != nil {
		// The budgets may be applied and a later field not: the next
		// admission reads the store.
		m.usage.forget(id)
		return nil, err
	}
	m.usage.patched(ctx, before, s)
	return s, nil
}

// patch is PatchSession once the patch is checked.
func (m *Manager) patch(ctx context.Context, id string, p berth.SessionPatch) (*berth.Session, error) {
	// A delete waits for the change, or the change for it.
	defer m.sessions.lock(id, false)()
	ls := m.set.liveOf(id)
	if ls == nil {
		if p.Agent() {
			if _, err := m.store.GetSession(ctx, id); err != nil {
				return nil, err
			}
			return nil, berth.Errorf(berth.EConflict, "session is stopped: the agent's mode, model and config are changed while it runs (resume it first)")
		}
		s, err := m.patchStored(ctx, id, p)
		if err == nil || !berth.IsCode(err, berth.EConflict) {
			return s, err
		}
		// A resume took the session live meanwhile: change it there.
		if ls = m.set.liveOf(id); ls == nil {
			return nil, err
		}
	}
	return ls.Patch(ctx, p)
}

// patchStored changes the name and labels of a session that has no
// live session; EConflict when it is not stopped any more.
func (m *Manager) patchStored(ctx context.Context, id string, p berth.SessionPatch) (*berth.Session, error) {
	s, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := p.CheckLabels(s.Labels); err != nil {
		return nil, err
	}
	p.ApplyOwn(s)
	s.UpdatedAt = time.Now().UTC()
	if err := m.leases.leased(ctx, id, func() error { return m.store.UpdateSession(ctx, s, s.State) }); err != nil {
		return nil, err
	}
	out := m.stored(s)
	m.changes.publishStored(berth.ChangeSessionUpdated, out)
	return out, nil
}
