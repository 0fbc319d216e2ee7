package session

import (
	"context"
	"os"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"

	live "github.com/berth-sh/berth/session/live"
)

// GetSession implements berth.SessionService: live sessions come from
// memory, the rest from the store. A session the boot is still
// reattaching answers at once with what the store holds of it, as the
// list shows it (docs/api.md, "Agents outlive the daemon (shims)", Reattach at boot).
func (m *Manager) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	if ls := m.set.liveOf(id); ls != nil {
		v := ls.View()
		if m.opts.Storage != nil {
			// How far the object store has it is the store's alone.
			if s, err := m.store.GetSession(ctx, id); err == nil {
				v.Storage = s.Storage
			}
		}
		return v, nil
	}
	s, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.State != berth.StateStopped {
		// Driven by another node, or by none yet.
		m.leases.withOwners(ctx, []*berth.Session{s})
	}
	return m.stored(s), nil
}

// stored completes a session read from the store for display.
func (m *Manager) stored(s *berth.Session) *berth.Session {
	if seq := m.log.LastSeq(s.ID); seq > s.LastSeq {
		s.LastSeq = seq
	}
	s.Resumable = live.Resumable(s, m.place.managedMovesHere(s) != "")
	s.Badge = s.ComputeBadge(false, false)
	return s
}

// ListSessions implements berth.SessionService.
func (m *Manager) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	forgets := m.set.forgets()
	page, err := m.store.ListSessions(ctx, f)
	if err != nil {
		return nil, err
	}
	var remote []*berth.Session
	for i, s := range page.Sessions {
		if ls := m.set.liveOf(s.ID); ls != nil {
			page.Sessions[i] = ls.View()
		} else {
			if s.State != berth.StateStopped && m.set.forgets() != forgets {
				// It may have stopped here since its row was read, and
				// its row says so now.
				if now, err := m.store.GetSession(ctx, s.ID); err == nil {
					s = now
				}
			}
			page.Sessions[i] = m.stored(s)
			if s.State != berth.StateStopped {
				remote = append(remote, s)
			}
		}
	}
	// Those live elsewhere are shown with the node that drives them.
	m.leases.withOwners(ctx, remote)
	if page.Sessions == nil {
		page.Sessions = []*berth.Session{}
	}
	return page, nil
}

// StopSession implements berth.SessionService.
func (m *Manager) StopSession(ctx context.Context, id string) (*berth.Session, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if ls := m.set.liveOf(id); ls != nil {
		ls.Stop(context.WithoutCancel(ctx), berth.StopUserRequested, nil)
	}
	return m.GetSession(ctx, id)
}

// DeleteSession implements berth.SessionService: stop, then delete the log,
// the session's private state and its managed workspace (never a workspace
// the user gave).
func (m *Manager) DeleteSession(ctx context.Context, id string) error {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return err
	}
	// No resume starts an agent, nor a snapshot archives the workspace,
	// while the session is being deleted.
	defer m.sessions.lock(id, true)()
	s, err := m.StopSession(ctx, id)
	if err != nil {
		return err
	}
	if err := m.log.FlushSession(ctx, id); err != nil {
		return err
	}
	if fn := m.opts.BeforeDelete; fn != nil {
		if err := fn(ctx, id); err != nil {
			m.logger.Warn("the log was not read before its deletion", "session_id", id, "err", err)
		}
	}
	// The subtree goes with its root (its stop stopped it).
	if err := m.trees.deleteChildren(ctx, id); err != nil {
		return err
	}
	if err := m.leases.leased(ctx, id, func() error { return m.store.DeleteSession(ctx, id) }); err != nil {
		return err
	}
	m.log.Forget(id)
	m.usage.forget(id)
	m.changes.publishStored(berth.ChangeSessionDeleted, s)
	shim.RemoveSessionBundles(m.opts.RunDir, id)
	if err := os.RemoveAll(m.place.sessionDir(id)); err != nil {
		m.logger.Warn("remove session state", "session_id", id, "err", err)
	}
	if s.ManagedWorkspace {
		if err := os.RemoveAll(s.Workspace); err != nil {
			m.logger.Warn("remove managed workspace", "session_id", id, "err", err)
		}
	}
	// The worktree's git directory goes; its branch stays.
	m.place.removeWorktree(context.WithoutCancel(ctx), s.Worktree)
	if m.opts.Checkpoints != nil {
		// Blobs other sessions' checkpoints name stay.
		if err := m.opts.Checkpoints.Delete(id); err != nil {
			m.logger.Warn("remove checkpoints", "session_id", id, "err", err)
		}
	}
	if m.opts.Snapshots != nil {
		if err := m.opts.Snapshots.Delete(id); err != nil {
			m.logger.Warn("remove snapshots", "session_id", id, "err", err)
		}
	}
	if m.opts.Storage != nil {
		m.opts.Storage.Deleted(id)
	}
	return nil
}

// ListEvents implements berth.SessionService: the committed events, read
// from the store, also of a session the boot is still reattaching.
func (m *Manager) ListEvents(ctx context.Context, id string, f berth.EventFilter) ([]berth.Event, error) {
	if f.After < 0 || f.Limit < 0 {
		return nil, berth.Errorf(berth.EInvalid, "after and limit must not be negative")
	}
	if f.Limit == 0 {
		f.Limit = berth.DefaultEventLimit
	}
	if f.Limit > berth.MaxEventLimit {
		f.Limit = berth.MaxEventLimit
	}
	// A page of a flooding agent's events is bounded by bytes too.
	f.MaxBytes = berth.EventPageBytes
	if m.set.liveOf(id) == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
	}
	evs, err := m.store.ListEvents(ctx, id, f)
	if err != nil {
		return nil, err
	}
	if evs == nil {
		evs = []berth.Event{}
	}
	return evs, nil
}

// StreamEvents implements berth.SessionService.
func (m *Manager) StreamEvents(ctx context.Context, id string, after int64) (berth.EventStream, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, berth.Errorf(berth.EInvalid, "after must not be negative")
	}
	if m.set.liveOf(id) == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
	}
	return m.log.Stream(ctx, id, after)
}
