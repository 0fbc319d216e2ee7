package session

import (
	"context"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"
)

// movesHere is the workspace on this node of a session whose resume moves
// it here ("" when it stays where it is): a managed workspace outside this
// node's workspace root is another node's, and comes from the Restorer.
// A host path never moves.
func (pl *placement) movesHere(s *berth.Session) string {
	root := resolvedPath(pl.workspacesDir())
	if pl.m.opts.Restorer == nil || !s.ManagedWorkspace || pathx.Within(root, s.Workspace) {
		return ""
	}
	return filepath.Join(root, s.ID)
}

// restore is the stage of a resume that moves the session here: its
// workspace and HOME made afresh on this node by the Restorer before the
// agent starts and reloads its conversation from that HOME.
func (b *birth) restore(ctx context.Context) error {
	if b.moved == "" {
		return nil
	}
	m, id, ws := b.m, b.s.ID, b.moved
	b.onFail(func() {
		_ = os.RemoveAll(ws)
		_ = os.RemoveAll(m.place.sessionDir(id))
	})
	if err := m.opts.Restorer.Restore(ctx, id, ws, m.place.homeDir(id)); err != nil {
		// The session stays stopped where it was, for another try.
		return berth.WrapError(berth.EUnavailable, err, "the session cannot move to node %s: its workspace and HOME were not restored from the object store", m.opts.NodeID)
	}
	return nil
}
