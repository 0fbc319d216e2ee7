package checkpoint

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/berth-sh/berth"
)

// CopyTree copies the directory src into the existing, empty directory
// dst the way a checkpoint reads and a restore writes: never following a
// symlink (every directory opened one component at a time and checked),
// leaving out what a checkpoint skips (special files, symlinks that leave,
// .git, .gitignore'd paths, files over the store's limits), keeping modes
// (and owners, as root). It returns the paths left out. A fork copies its
// parent agent's private home with it, which an agent may be writing.
func (s *Store) CopyTree(ctx context.Context, src, dst string) ([]Skip, error) {
	from, err := os.OpenRoot(src)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot open the directory to copy")
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot open the copy's directory")
	}
	defer to.Close()
	asRoot := os.Geteuid() == 0
	w := &walker{ctx: ctx, root: from, opts: s.opts}
	w.fn = func(v *visit) (bool, string, error) {
		e := v.entry
		switch e.Kind {
		case KindDir:
			if err := to.Mkdir(e.Path, fs.FileMode(e.Mode)|0o700); err != nil {
				return false, "", err
			}
		case KindSymlink:
			if err := to.Symlink(e.Target, e.Path); err != nil {
				return false, "", err
			}
			if asRoot {
				_ = to.Lchown(e.Path, e.UID, e.GID)
			}
			return true, "", nil
		case KindFile:
			reason, err := copyFile(v, to, asRoot)
			if err != nil || reason != "" {
				return false, reason, err
			}
		}
		return true, "", nil
	}
	if err := w.walkDir(from, ".", ""); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, berth.WrapError(berth.EInternal, err, "cannot copy the directory")
	}
	// Directory modes and owners once they are filled.
	err = fs.WalkDir(to.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == "." {
			return err
		}
		fi, err := from.Lstat(p)
		if err != nil || !fi.IsDir() {
			return nil
		}
		e := entryOf(p, fi)
		if asRoot {
			_ = to.Lchown(p, e.UID, e.GID)
		}
		return to.Chmod(p, fs.FileMode(e.Mode))
	})
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot copy the directory")
	}
	return w.skipped, nil
}

// copyFile copies the regular file v into the same path under to.
func copyFile(v *visit, to *os.Root, asRoot bool) (string, error) {
	in, fi, err := openFile(v.dir, v.name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errSwapped) {
		return SkipChanged, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return SkipUnreadable, nil
	}
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := to.OpenFile(v.entry.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", err
	}
	n, err := io.Copy(out, io.LimitReader(in, v.entry.Size+1))
	if err == nil && n != v.entry.Size {
		_ = out.Close()
		_ = to.Remove(v.entry.Path)
		return SkipChanged, nil
	}
	if err == nil {
		err = out.Chmod(fi.Mode().Perm())
	}
	if err == nil && asRoot {
		err = out.Chown(v.entry.UID, v.entry.GID)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return "", err
}
