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
	"golang.org/x/sync/errgroup"
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
// session's, leaves workspaceDir alone), and returns that state; see
// RestoreTree.
func Restore(ctx context.Context, c *Client, sessionID, workspaceDir, homeDir string, opts RestoreOptions) (*State, error) {
	st, err := ReadState(ctx, c, sessionID)
	if err != nil {
		return nil, err
	}
	if workspaceDir != "" && st.Workspace != nil {
		if err := RestoreTree(ctx, c, st.Workspace, workspaceDir, opts); err != nil {
			return nil, err
		}
	}
	if homeDir != "" && st.Home != nil {
		if err := RestoreTree(ctx, c, st.Home, homeDir, opts); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// RestoreTree writes the manifest t into the empty directory dir.
//
// Every path is written through an os.Root of dir, so nothing lands
// outside it whatever the manifest says; a path with "..", an absolute
// path, a link that leads out, a path below something not a directory of
// the manifest, or a bad place in a pack is refused (EInternal: the state
// is damaged) before anything is written. Each file's SHA-256 is checked:
// a packed file's before it is written, a blob's while it is. Modes are
// kept without their set-id and sticky bits. On an error what was written
// stays: the caller removes the directory.
func RestoreTree(ctx context.Context, c *Client, t *Tree, dir string, opts RestoreOptions) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot open the directory to restore into")
	}
	defer root.Close()
	if empty, err := isEmpty(root); err != nil || !empty {
		return berth.Errorf(berth.EConflict, "the directory to restore into is not empty")
	}
	p, err := planRestore(t.Files)
	if err != nil {
		return err
	}
	if err := makeEntries(ctx, root, p.made, opts); err != nil {
		return err
	}
	// The files' contents, Workers reads at a time: each large file's
	// blob, each range of a pack.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Workers)
	for _, f := range p.blobs {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return restoreFile(gctx, c, root, f, opts) })
	}
	for _, r := range p.ranges {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return restoreRange(gctx, c, root, r, opts) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Deepest first: a read-only directory is made so after its contents.
	for i := len(p.made) - 1; i >= 0; i-- {
		if d := p.made[i]; d.Kind == checkpoint.KindDir {
			if err := root.Chmod(d.Path, os.FileMode(d.Mode&0o777)); err != nil {
				return wrapRestore(err)
			}
		}
	}
	return nil
}

// restorePlan is what a restore makes of a manifest: the paths made at
// once (directories, links, empty files), in path order, the files read
// from blobs, and the ranges of packs read.
type restorePlan struct {
	made   []File
	blobs  []File
	ranges []packRange
}

// planRestore checks every path of a manifest and sorts them by how they
// are made; EInternal for a damaged one.
func planRestore(files []File) (*restorePlan, error) {
	files = slices.Clone(files)
	// A parent's path is a prefix of its children's: it sorts first.
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	kinds := map[string]string{".": checkpoint.KindDir}
	p := &restorePlan{}
	var packedFiles []File
	for _, f := range files {
		if !checkpoint.ValidPath(f.Path) || kinds[f.Path] != "" {
			return nil, berth.Errorf(berth.EInternal, "object store: the state has a bad or repeated path")
		}
		if kinds[path.Dir(f.Path)] != checkpoint.KindDir {
			return nil, berth.Errorf(berth.EInternal, "object store: the state has a path outside its directories")
		}
		kinds[f.Path] = f.Kind
		switch f.Kind {
		case checkpoint.KindDir:
			p.made = append(p.made, f)
		case checkpoint.KindSymlink:
			if linkcheck.LexicallyEscapes(f.Path, f.Target) {
				return nil, berth.Errorf(berth.EInternal, "object store: the state has a symlink out of its directory")
			}
			p.made = append(p.made, f)
		case checkpoint.KindFile:
			if !checkpoint.ValidHash(f.SHA256) || f.Size < 0 {
				return nil, berth.Errorf(berth.EInternal, "object store: the state has a bad hash or size")
			}
			switch {
			case f.Pack != "":
				if err := checkPacked(f); err != nil {
					return nil, err
				}
				packedFiles = append(packedFiles, f)
			case f.Offset != 0:
				return nil, berth.Errorf(berth.EInternal, "object store: the state has an offset without a pack")
			case f.Size == 0:
				if f.SHA256 != emptyHash {
					return nil, berth.Errorf(berth.EInternal, "object store: the state has an empty file whose hash is not an empty file's")
				}
				p.made = append(p.made, f)
			default:
				p.blobs = append(p.blobs, f)
			}
		default:
			return nil, berth.Errorf(berth.EInternal, "object store: the state has a path of unknown kind")
		}
	}
	var err error
	p.ranges, err = packRanges(packedFiles)
	return p, err
}

// makeEntries makes the directories (writable: their modes are set once
// they are filled), links and empty files of a plan, in path order.
func makeEntries(ctx context.Context, root *os.Root, made []File, opts RestoreOptions) error {
	for _, f := range made {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch f.Kind {
		case checkpoint.KindDir:
			err = root.Mkdir(f.Path, 0o700)
		case checkpoint.KindSymlink:
			err = root.Symlink(f.Target, f.Path)
		default:
			err = writeFile(root, f, nil, opts)
		}
		if err != nil {
			return wrapRestore(err)
		}
		if f.Kind != checkpoint.KindFile {
			if err := chown(root, f.Path, opts); err != nil {
				return err
			}
		}
	}
	return nil
}

// chown gives the restored path p to opts' user when it says so.
func chown(root *os.Root, p string, opts RestoreOptions) error {
	if !opts.Chown {
		return nil
	}
	return wrapRestore(root.Lchown(p, opts.UID, opts.GID))
}

// wrapRestore gives a restore's error a code (a berth error keeps its own).
func wrapRestore(err error) error {
	if err == nil {
		return nil
	}
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

// createFile makes the file p, which must not exist, for writing, never
// through a link.
func createFile(root *os.Root, p string) (*os.File, error) {
	return root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
}

// finishFile gives the file out being restored f's mode (without set-id
// and sticky bits) and opts' owner.
func finishFile(out *os.File, f File, opts RestoreOptions) error {
	if err := out.Chmod(os.FileMode(f.Mode & 0o777)); err != nil {
		return err
	}
	if opts.Chown {
		return out.Chown(opts.UID, opts.GID)
	}
	return nil
}

// writeFile makes the file f with body, its content already checked.
func writeFile(root *os.Root, f File, body []byte, opts RestoreOptions) error {
	out, err := createFile(root, f.Path)
	if err != nil {
		return wrapRestore(err)
	}
	_, err = out.Write(body)
	if err == nil {
		err = finishFile(out, f, opts)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return wrapRestore(err)
}

// restoreFile writes the blob of f at its path, checking its size and
// hash while it is written; a blob that does not match is EInternal and
// the file is removed.
func restoreFile(ctx context.Context, c *Client, root *os.Root, f File, opts RestoreOptions) error {
	r, _, err := c.Get(ctx, BlobKey(f.SHA256))
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := createFile(root, f.Path)
	if err != nil {
		return wrapRestore(err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	if err == nil && (n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256) {
		err = berth.Errorf(berth.EInternal, "object store: the blob of %s does not match its hash", f.Path)
	}
	if err == nil {
		err = wrapRestore(finishFile(out, f, opts))
	}
	if cerr := out.Close(); err == nil {
		err = wrapRestore(cerr)
	}
	if err != nil {
		_ = root.Remove(f.Path)
		if _, ok := err.(*berth.Error); !ok {
			err = c.wrap(err, "read the blob of %s", f.Path)
		}
		return err
	}
	return nil
}
