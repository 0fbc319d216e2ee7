package objstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/linkcheck"
)

// RestoreOptions say whom the restored files belong to.
type RestoreOptions struct {
	// Chown, when set, gives every restored path to UID:GID (a root
	// daemon restores for its sandboxes' user); else they are the
	// daemon's.
	Chown    bool
	UID, GID int
}

// Restore writes the workspace and HOME of the session's latest
// state.json into workspaceDir and homeDir, which must exist and be
// empty ("" skips one; a state without a workspace, a host-path
// session's, leaves workspaceDir alone), and returns that state.
//
// Every path is written through an os.Root of its directory, so nothing
// lands outside it whatever the manifest says; a path with "..", an
// absolute path, a link that leads out, or a path below something not
// a directory of the manifest is refused (EInternal: the state is
// damaged). Each blob's SHA-256 is checked while it is written. Modes are
// kept without their set-id and sticky bits. On an error what was written
// stays: the caller removes the directories.
func Restore(ctx context.Context, c *Client, sessionID, workspaceDir, homeDir string, opts RestoreOptions) (*State, error) {
	st, err := ReadState(ctx, c, sessionID)
	if err != nil {
		return nil, err
	}
	if workspaceDir != "" && st.Workspace != nil {
		if err := restoreTree(ctx, c, st.Workspace, workspaceDir, opts); err != nil {
			return nil, err
		}
	}
	if homeDir != "" && st.Home != nil {
		if err := restoreTree(ctx, c, st.Home, homeDir, opts); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// restoreTree writes t into the empty directory dir.
func restoreTree(ctx context.Context, c *Client, t *Tree, dir string, opts RestoreOptions) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot open the directory to restore into")
	}
	defer root.Close()
	if empty, err := isEmpty(root); err != nil || !empty {
		return berth.Errorf(berth.EConflict, "the directory to restore into is not empty")
	}
	files := slices.Clone(t.Files)
	// A parent's path is a prefix of its children's: it sorts first.
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	kinds := map[string]string{".": checkpoint.KindDir}
	var dirs []File
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !checkpoint.ValidPath(f.Path) || kinds[f.Path] != "" {
			return berth.Errorf(berth.EInternal, "object store: the state has a bad or repeated path")
		}
		if kinds[path.Dir(f.Path)] != checkpoint.KindDir {
			return berth.Errorf(berth.EInternal, "object store: the state has a path outside its directories")
		}
		kinds[f.Path] = f.Kind
		mode := os.FileMode(f.Mode & 0o777)
		switch f.Kind {
		case checkpoint.KindDir:
			// Made writable for its contents; its mode is set at the end.
			err = root.Mkdir(f.Path, 0o700)
			dirs = append(dirs, f)
		case checkpoint.KindFile:
			err = restoreFile(ctx, c, root, f, mode)
		case checkpoint.KindSymlink:
			if linkcheck.LexicallyEscapes(f.Path, f.Target) {
				return berth.Errorf(berth.EInternal, "object store: the state has a symlink out of its directory")
			}
			err = root.Symlink(f.Target, f.Path)
		default:
			return berth.Errorf(berth.EInternal, "object store: the state has a path of unknown kind")
		}
		if err != nil {
			return wrapRestore(err)
		}
		if opts.Chown {
			if err := root.Lchown(f.Path, opts.UID, opts.GID); err != nil {
				return wrapRestore(err)
			}
		}
	}
	// Deepest first: a read-only directory is made so after its contents.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := root.Chmod(dirs[i].Path, os.FileMode(dirs[i].Mode&0o777)); err != nil {
			return wrapRestore(err)
		}
	}
	return nil
}

// wrapRestore gives a restore's error a code (a berth error keeps its own).
func wrapRestore(err error) error {
	var be *berth.Error
	if errors.As(err, &be) {
		return err
	}
	return berth.WrapError(berth.EInternal, err, "cannot restore a file")
}

// isEmpty reports whether the open directory root has no entry.
func isEmpty(root *os.Root) (bool, error) {
	d, err := root.Open(".")
	if err != nil {
		return false, err
	}
	defer d.Close()
	names, err := d.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// restoreFile writes the blob of f at its path, checking its size and
// hash while it is written; a blob that does not match is EInternal and
// the file is removed.
func restoreFile(ctx context.Context, c *Client, root *os.Root, f File, mode os.FileMode) error {
	if !checkpoint.ValidHash(f.SHA256) || f.Size < 0 {
		return berth.Errorf(berth.EInternal, "object store: the state has a bad hash")
	}
	r, _, err := c.Get(ctx, BlobKey(f.SHA256))
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && (n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256) {
		err = berth.Errorf(berth.EInternal, "object store: the blob of %s does not match its hash", f.Path)
	}
	if err != nil {
		_ = root.Remove(f.Path)
		if _, ok := err.(*berth.Error); !ok {
			err = c.wrap(err, "read the blob of %s", f.Path)
		}
		return err
	}
	return root.Chmod(f.Path, mode)
}
