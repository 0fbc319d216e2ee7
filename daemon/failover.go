package daemon

import (
	"context"
	"log/slog"
	"os"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/objstore"
)

// storageRestorer is the manager's Restorer with [storage] url: a session
// resumed here from another node (failover, or a resume by hand) gets its
// workspace and HOME from the object store (docs/api.md, "Failover with
// an object store"). nil without a storage URL: nothing moves.
func (d *Daemon) storageRestorer(o Options) (berth.Restorer, error) {
	sc := o.Config.Storage
	if !sc.Enabled() {
		return nil, nil
	}
	c, err := objstore.Open(objstore.Config{URL: sc.URL, AccessKeyFile: sc.AccessKeyFile, SecretKeyFile: sc.SecretKeyFile,
		Environ: os.Environ()})
	if err != nil {
		return nil, err
	}
	return objRestorer{c: c, store: d.store, log: o.Logger}, nil
}

// objRestorer restores through objstore.Restore. The files are the
// daemon's: a sandbox gives them to its user as it starts.
type objRestorer struct {
	c     *objstore.Client
	store berth.Store
	log   *slog.Logger
}

// Restore implements berth.Restorer.
func (r objRestorer) Restore(ctx context.Context, id, workspaceDir, homeDir string) error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{workspaceDir, 0o755}, {homeDir, 0o700}} {
		if err := os.RemoveAll(d.path); err != nil {
			return berth.WrapError(berth.EInternal, err, "clear the session's old files on this node")
		}
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return berth.WrapError(berth.EInternal, err, "create the session's directories on this node")
		}
	}
	_, err := objstore.Restore(ctx, r.c, id, workspaceDir, homeDir, objstore.RestoreOptions{})
	if !berth.IsCode(err, berth.ENotFound) {
		return err
	}
	// No state: fine for a session none of whose turns reached the store,
	// not for one the store had.
	if s, gerr := r.store.GetSession(ctx, id); gerr != nil || s.Storage != nil {
		return err
	}
	r.log.Warn("the object store has no state of a session that moves here: its workspace and HOME start empty", "session_id", id)
	return nil
}
