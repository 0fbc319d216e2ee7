package daemon

import (
	"context"
	"os"

	"github.com/berth-sh/berth/objstore"
	"github.com/berth-sh/berth/session"
)

// storageRestorer is the manager's Restorer with [storage] url: a session
// resumed here from another node (failover, or a resume by hand) gets its
// workspace and HOME from the object store (docs/api.md, "Failover with
// an object store"). nil without a storage URL: nothing moves.
func storageRestorer(o Options) (session.Restorer, error) {
	sc := o.Config.Storage
	if !sc.Enabled() {
		return nil, nil
	}
	c, err := objstore.Open(objstore.Config{URL: sc.URL, AccessKeyFile: sc.AccessKeyFile, SecretKeyFile: sc.SecretKeyFile,
		Environ: os.Environ()})
	if err != nil {
		return nil, err
	}
	return objRestorer{c}, nil
}

// objRestorer restores through objstore.Restore. The files are the
// daemon's: a sandbox gives them to its user as it starts.
type objRestorer struct{ c *objstore.Client }

// Restore implements session.Restorer.
func (r objRestorer) Restore(ctx context.Context, id, workspaceDir, homeDir string) error {
	_, err := objstore.Restore(ctx, r.c, id, workspaceDir, homeDir, objstore.RestoreOptions{})
	return err
}
