package session

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/pathx"

	live "github.com/berth-sh/berth/session/live"
)

// managedMovesHere is the workspace on this node of a managed session
// whose resume moves it here ("" when it stays where it is): a managed
// workspace outside this node's workspace root is another node's, and
// comes from the Restorer. A host path never moves.
func (pl *placement) managedMovesHere(s *berth.Session) string {
	root := pl.ownPaths().workspaces
	if pl.m.opts.Restorer == nil || !s.ManagedWorkspace || pathx.Within(root, s.Workspace) {
		return ""
	}
	return filepath.Join(root, s.ID)
}

// movesHere is the workspace on this node of a session whose resume
// moves it here ("" when it stays where it is): a managed one's (see
// managedMovesHere), or a child's, whose workspace is in its root's
// (docs/api.md, "Failover with an object store"): it moves with the root
// (see childMovesHere); withRoot says so.
func (pl *placement) movesHere(ctx context.Context, s *berth.Session) (ws string, withRoot bool, err error) {
	if ws := pl.managedMovesHere(s); ws != "" || s.ManagedWorkspace || pl.m.opts.Restorer == nil {
		return ws, false, nil
	}
	root := pl.ownPaths().workspaces
	if pathx.Within(root, s.Workspace) {
		return "", false, nil
	}
	ws, err = pl.childMovesHere(ctx, s, root)
	return ws, ws != "", err
}

// childMovesHere is the workspace on this node of a child whose root
// moved here (its managed workspace under root now): the same place in
// the root's workspace as on the node it left, which the root's restore
// brought. "" when the child stays where it is (not a child, its root's
// workspace a host path or not here). The place must be a directory of
// the root's workspace, no link on the way: what the agents wrote there
// came through the object store.
func (pl *placement) childMovesHere(ctx context.Context, s *berth.Session, root string) (string, error) {
	if s.ParentID == "" || s.RootID == "" || s.RootID == s.ID {
		return "", nil
	}
	r, err := pl.m.store.GetSession(ctx, s.RootID)
	if err != nil {
		if isNotFound(err) {
			return "", nil
		}
		return "", err
	}
	if !r.ManagedWorkspace || !pathx.Within(root, r.Workspace) {
		return "", nil
	}
	// The root's managed workspace on the old node was <its root>/<root
	// id>: the child's place is what follows that.
	parts := strings.Split(filepath.ToSlash(s.Workspace), "/")
	i := slices.Index(parts, s.RootID)
	if i < 0 {
		return "", nil
	}
	rel := filepath.Join(parts[i+1:]...)
	if rel != "" && !filepath.IsLocal(rel) {
		return "", nil
	}
	ws := filepath.Join(r.Workspace, rel)
	if resolvedPath(ws) != ws || !live.WorkspaceExists(ws) {
		return "", berth.Errorf(berth.EConflict, "session is not resumable: its place in its root session's workspace is gone")
	}
	return ws, nil
}

// restore is the stage of a resume that moves the session here: its
// workspace and HOME made afresh on this node by the Restorer before the
// agent starts and reloads its conversation from that HOME. A child
// moving with its root gets its HOME alone: its workspace is the root's,
// restored with it.
func (b *birth) restore(ctx context.Context) error {
	if b.moved == "" {
		return nil
	}
	m, id, ws := b.m, b.s.ID, b.moved
	if b.movedWithRoot {
		ws = ""
	}
	b.onFail(func() {
		if ws != "" {
			_ = os.RemoveAll(ws)
		}
		_ = os.RemoveAll(m.place.sessionDir(id))
	})
	if err := m.opts.Restorer.Restore(ctx, id, ws, m.place.homeDir(id)); err != nil {
		// The session stays stopped where it was, for another try.
		return berth.WrapError(berth.EUnavailable, err, "the session cannot move to node %s: its workspace and HOME were not restored from the object store", m.opts.NodeID)
	}
	return nil
}
