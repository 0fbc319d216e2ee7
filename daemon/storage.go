package daemon

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/objstore"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/snapshot"
)

// openStorage makes the Syncer that writes sessions' state to the object
// store when [storage] url is set (docs/api.md, "Session state in an
// object store"). It does not reach the store: one that is down must not
// stop the daemon (the Syncer retries, and warns the sessions).
func (d *Daemon) openStorage(o Options, ckpts *checkpoint.Store, snaps *snapshot.Store, hidden []string) error {
	sc := o.Config.Storage
	if !sc.Enabled() {
		return nil
	}
	c, err := objstore.Open(objstore.Config{URL: sc.URL, AccessKeyFile: sc.AccessKeyFile, SecretKeyFile: sc.SecretKeyFile,
		Environ: os.Environ()})
	if err != nil {
		return err
	}
	spool := filepath.Join(o.Home, "run", "objstore")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot create %s", spool)
	}
	d.storage = objstore.NewSyncer(objstore.SyncerOptions{
		Uploader:    objstore.NewUploader(c, spool),
		Checkpoints: ckpts,
		Snapshots:   snaps,
		// The whole workspace moves: its .git and .gitignore'd files too.
		Scan: checkpoint.Options{MaxFileBytes: int64(sc.MaxFileBytes), MaxTotalBytes: int64(sc.MaxTotalBytes), Whole: true},
		Resolve: func(ctx context.Context, id, turnID string) (objstore.Target, error) {
			return d.storageTarget(ctx, id, turnID, hidden)
		},
		Synced: d.store.SetStorageSynced,
		Warn:   d.storageWarn,
		// Beside the home's other state, not in run/.
		DeletedDir: filepath.Join(o.Home, "storage", "deleted"),
		Logger:     o.Logger,
	})
	return nil
}

// storageDrain bounds how long a closing daemon writes the sessions
// whose turns ended last.
const storageDrain = 10 * time.Second

// storageHook is the manager's Storage: the Syncer, or none.
func (d *Daemon) storageHook() session.Storage {
	if d.storage == nil {
		return nil
	}
	return d.storage
}

// storageTarget is what the Syncer writes of session id after its turn
// turnID: the seq of that turn's turn_ended (once the log has it), its
// managed workspace (a host path does not move) and its HOME.
// ENotFound when the session is gone.
func (d *Daemon) storageTarget(ctx context.Context, id, turnID string, hidden []string) (objstore.Target, error) {
	s, err := d.store.GetSession(ctx, id)
	if err != nil {
		return objstore.Target{}, err
	}
	if d.node != nil {
		// A node that lost the session (paused, then back) writes nothing
		// of it over what the node driving it now writes.
		owner, _, err := d.node.Owner(ctx, id)
		if err != nil {
			return objstore.Target{}, err
		}
		if owner != "" && owner != d.node.ID() {
			return objstore.Target{}, berth.Errorf(berth.ENotFound, "session %s is driven by node %s now", id, owner)
		}
	}
	if err := d.log.FlushSession(ctx, id); err != nil {
		return objstore.Target{}, err
	}
	evs, err := d.store.ListEvents(ctx, id, berth.EventFilter{Type: berth.EventTurnEnded, TurnID: turnID, Limit: 1})
	if err != nil {
		return objstore.Target{}, err
	}
	if len(evs) == 0 {
		return objstore.Target{}, berth.Errorf(berth.EUnavailable, "the turn's end is not in the log yet")
	}
	t := objstore.Target{Seq: evs[0].Seq, TurnID: turnID, Home: d.mgr.HomeDir(id), Hide: hidden}
	if s.ManagedWorkspace {
		t.Workspace = s.Workspace
	}
	return t, nil
}

// storageWarn tells session id, as a runtime_warning, why its state is
// not in the object store.
func (d *Daemon) storageWarn(id, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.log.Append(ctx, berth.NewEvent(id, "", berth.EventRuntimeWarning, map[string]any{"reason": reason})); err != nil {
		d.logger.Warn("object store warning not logged", "session", id, "err", err)
	}
}
