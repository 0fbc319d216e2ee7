package daemon

import (
	"context"
	"log/slog"
	"os"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/objstore"
)

// storageRestorer is the manager's Restorer with [storage] url: a session
// resumed here from another node (failover, or a resume by hand) gets its
// workspace, HOME and checkpoints from the object store (docs/api.md,
// "Failover with an object store"). ckpts is the node's checkpoint store
// (nil with checkpoints off). nil without a storage URL: nothing moves.
func (d *Daemon) storageRestorer(o Options, ckpts *checkpoint.Store) (berth.Restorer, error) {
	sc := o.Config.Storage
	if !sc.Enabled() {
		return nil, nil
	}
	c, err := objstore.Open(objstore.Config{URL: sc.URL, AccessKeyFile: sc.AccessKeyFile, SecretKeyFile: sc.SecretKeyFile,
		Environ: os.Environ()})
	if err != nil {
		return nil, err
	}
	return objRestorer{c: c, store: d.store, ckpts: ckpts, warn: d.storageWarn, log: o.Logger}, nil
}

// objRestorer restores through objstore.Restore and RestoreCheckpoints.
// The files are the daemon's: a sandbox gives them to its user as it
// starts.
type objRestorer struct {
	c     *objstore.Client
	store berth.Store
	// ckpts receives the session's checkpoints (nil: checkpoints are off
	// here); warn tells the session, as a runtime_warning, that they did
	// not come.
	ckpts *checkpoint.Store
	warn  func(id, reason string)
	log   *slog.Logger
}

// Restore implements berth.Restorer.
func (r objRestorer) Restore(ctx context.Context, id, workspaceDir, homeDir string) error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{workspaceDir, 0o755}, {homeDir, 0o700}} {
		if d.path == "" {
			// A child's workspace is its root's, restored with the root.
			continue
		}
		if err := os.RemoveAll(d.path); err != nil {
			return berth.WrapError(berth.EInternal, err, "clear the session's old files on this node")
		}
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return berth.WrapError(berth.EInternal, err, "create the session's directories on this node")
		}
	}
	st, err := objstore.Restore(ctx, r.c, id, workspaceDir, homeDir, objstore.RestoreOptions{})
	if berth.IsCode(err, berth.ENotFound) {
		// No state: fine for a session none of whose turns reached the
		// store, not for one the store had.
		if s, gerr := r.store.GetSession(ctx, id); gerr != nil || s.Storage != nil {
			return err
		}
		r.log.Warn("the object store has no state of a session that moves here: its workspace and HOME start empty", "session_id", id)
	} else if err != nil {
		return err
	}
	var ws *objstore.Tree
	if st != nil {
		ws = st.Workspace
	}
	r.restoreCheckpoints(ctx, id, workspaceDir, ws)
	return nil
}

// restoreCheckpoints brings the session's checkpoints from the store into
// the node's checkpoint store, in the session's tree, so that rewind and
// fork to the turns before the move work here. A failure does not stop
// the move (the workspace and HOME matter more): it is logged and told
// to the session as a runtime_warning.
//
// The checkpoints' blobs are read from the workspace just restored (ws,
// its manifest) where it has them, else from the store.
func (r objRestorer) restoreCheckpoints(ctx context.Context, id, workspaceDir string, ws *objstore.Tree) {
	if r.ckpts == nil {
		return
	}
	s, err := r.store.GetSession(ctx, id)
	n := 0
	if err == nil {
		// A child's checkpoints count in its root's tree.
		tree := s.RootID
		if tree == "" {
			tree = id
		}
		near, done := objstore.NearBlobs(workspaceDir, ws)
		n, err = objstore.RestoreCheckpoints(ctx, r.c, r.ckpts, tree, id, near)
		done()
	}
	if err == nil {
		r.log.Debug("checkpoints brought from the object store", "session_id", id, "checkpoints", n)
		return
	}
	r.log.Warn("a session that moves here did not get all its checkpoints from the object store", "session_id", id,
		"checkpoints", n, "err", err)
	if r.warn != nil {
		r.warn(id, "the session's checkpoints did not all come to this node from the object store (rewind and fork to a turn before the move may fail): "+berth.ErrorMessage(err))
	}
}
