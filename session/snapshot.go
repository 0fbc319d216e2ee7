package session

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/snapshot"

	live "github.com/berth-sh/berth/session/live"
)

// CreateSnapshot implements berth.SessionService. The archive is taken
// while the agent may be writing: a file that grows meanwhile is cut at the
// size it had when opened, one that shrinks fails the snapshot (conflict:
// try again).
func (m *Manager) CreateSnapshot(ctx context.Context, id string) (*berth.Snapshot, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	// A delete waits for the archive, or the archive finds the session
	// gone (not_found): never half a workspace, never an archive of a
	// deleted session.
	defer m.sessions.lock(id, false)()
	s, err := m.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.opts.Snapshots == nil {
		return nil, berth.Errorf(berth.EUnavailable, "snapshots are not configured")
	}
	if !live.WorkspaceExists(s.Workspace) {
		return nil, berth.Errorf(berth.EConflict, "the session's workspace is gone")
	}
	// A workspace that contains the daemon's home leaves it out.
	snap, err := m.opts.Snapshots.Create(ctx, id, s.Workspace, m.place.hidden()...)
	if err != nil {
		return nil, err
	}
	return fromSnapshot(snap), nil
}

// ListSnapshots implements berth.SessionService.
func (m *Manager) ListSnapshots(ctx context.Context, id string) ([]*berth.Snapshot, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if _, err := m.store.GetSession(ctx, id); err != nil {
		return nil, err
	}
	out := []*berth.Snapshot{}
	if m.opts.Snapshots == nil {
		return out, nil
	}
	snaps, err := m.opts.Snapshots.List(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		out = append(out, fromSnapshot(s))
	}
	return out, nil
}

// restoreSnapshot fills a new managed workspace from a snapshot.
func (b *birth) restoreSnapshot(ctx context.Context, snapID, workspace string) error {
	if b.m.opts.Snapshots == nil {
		return berth.Errorf(berth.EInvalid, "snapshots are not configured")
	}
	return b.m.opts.Snapshots.Restore(ctx, snapID, workspace)
}

// fromSnapshot converts the archive's description to the API's.
func fromSnapshot(s *snapshot.Snapshot) *berth.Snapshot {
	return &berth.Snapshot{ID: s.ID, SessionID: s.SessionID, SizeBytes: s.SizeBytes, Files: s.Files,
		Skipped: s.Skipped, CreatedAt: s.CreatedAt}
}
