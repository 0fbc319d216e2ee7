package session

import (
	"context"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"

	live "github.com/berth-sh/berth/session/live"
)

// Restorer brings a session's files to this node from where they are kept
// off every node: the object store (docs/api.md, "Failover with an object
// store"; package objstore implements it).
type Restorer interface {
	// Restore writes the session's managed workspace and private HOME, as
	// of its last completed turn, into workspaceDir and homeDir, which
	// exist and are empty. ENotFound when the store has no state of it.
	Restore(ctx context.Context, sessionID, workspaceDir, homeDir string) error
}

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

// resumable is live.Resumable on this node, where a session that would
// move here has its workspace in the Restorer.
func (pl *placement) resumable(s *berth.Session) bool {
	return live.Reopenable(s) && (pl.movesHere(s) != "" || live.WorkspaceExists(s.Workspace))
}

// restore is the stage of a resume that moves the session here: its
// workspace and HOME made afresh on this node and filled from the
// Restorer, before the agent starts and reloads its conversation from
// that HOME. A store with no state of the session (it never completed a
// synced turn) leaves both empty, said in a runtime_warning; one that had
// it and lost it fails the resume.
func (b *birth) restore(ctx context.Context) error {
	if b.moved == "" {
		return nil
	}
	m, id, ws := b.m, b.s.ID, b.moved
	home := m.place.homeDir(id)
	// What an earlier stay on this node left is older than the store's.
	for _, dir := range []string{ws, home} {
		if err := os.RemoveAll(dir); err != nil {
			return berth.WrapError(berth.EInternal, err, "clear the session's old files on this node")
		}
	}
	if err := mkdirs(home, ws, true); err != nil {
		return err
	}
	b.onFail(func() {
		_ = os.RemoveAll(ws)
		_ = os.RemoveAll(m.place.sessionDir(id))
	})
	err := m.opts.Restorer.Restore(ctx, id, ws, home)
	switch {
	case err == nil:
	case isNotFound(err) && b.s.Storage == nil:
		b.warn("the object store has no state of this session: it resumed on node " + m.opts.NodeID + " with an empty workspace and HOME")
	default:
		// The session stays stopped where it was, for another try.
		return berth.WrapError(berth.EUnavailable, err, "the session cannot move to node %s: its workspace and HOME were not restored from the object store", m.opts.NodeID)
	}
	return nil
}
