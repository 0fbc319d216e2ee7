package snapshot

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/linkcheck"
	"github.com/klauspost/compress/zstd"
)

// maxWindow bounds the zstd window Restore accepts, and so its memory; the
// encoder's default window is 8 MiB.
const maxWindow = 64 << 20

// restorePrefix starts the name of the directory, inside the destination,
// that an archive is extracted into before its entries are moved up.
const restorePrefix = ".berth-restore-"

// Restore extracts the snapshot snapID into dst, which must be an empty
// directory or not exist (its parent must); Restore then creates it.
//
// The archive is extracted, through os.Root, into a fresh directory inside
// dst, and its entries are moved up into dst only once all of it has been
// extracted and checked, so that dst is left as it was on any error,
// including ctx's. Restore refuses with berth.EInvalid any archive with an
// entry whose name is absolute, holds a ".." component or lies below a
// symlink of the archive; a symlink whose target is absolute or resolves
// outside dst (following the archive's other symlinks); a hard link,
// device, FIFO or any type but file, directory and symlink; or an entry
// that clashes with an earlier one. An archive over the Store's Options is
// refused with berth.ETooLarge. Files and directories get their permission
// bits (masked to 0777) and modification times; symlinks keep the time of
// the restore.
func (s *Store) Restore(ctx context.Context, snapID, dst string) error {
	_, archive, err := s.find(ctx, snapID)
	if err != nil {
		return err
	}
	f, err := os.Open(archive)
	if errors.Is(err, fs.ErrNotExist) {
		return berth.Errorf(berth.ENotFound, "no snapshot %s", snapID)
	}
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot open snapshot")
	}
	defer f.Close()
	zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot start decompression")
	}
	defer zr.Close()
	return restoreTar(ctx, zr, dst, s.opts)
}

// restoreTar extracts the tar stream r into dst as Restore describes.
func restoreTar(ctx context.Context, r io.Reader, dst string, opts Options) (err error) {
	created, err := prepareDst(dst)
	if err != nil {
		return err
	}
	dstRoot, err := os.OpenRoot(dst)
	if err != nil {
		if created {
			_ = os.Remove(dst)
		}
		return berth.WrapError(berth.EInternal, err, "cannot open destination")
	}
	defer dstRoot.Close()
	tmpName := restorePrefix + strings.ToLower(rand.Text())
	if err := dstRoot.Mkdir(tmpName, 0o700); err != nil {
		if created {
			_ = os.Remove(dst)
		}
		return berth.WrapError(berth.EInternal, err, "cannot create restore directory")
	}
	defer func() {
		if err != nil {
			_ = dstRoot.RemoveAll(tmpName)
			if created {
				_ = os.Remove(dst)
			}
		}
	}()
	tmpRoot, err := dstRoot.OpenRoot(tmpName)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot open restore directory")
	}
	x := &extractor{ctx: ctx, root: tmpRoot, opts: opts.withDefaults(), seen: map[string]bool{}, links: map[string]string{}}
	err = x.extract(r)
	if err == nil {
		err = x.finishDirs(tmpRoot, false)
	}
	_ = tmpRoot.Close()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := moveUp(dstRoot, tmpName); err != nil {
		return err
	}
	_ = dstRoot.Remove(tmpName)
	return x.finishDirs(dstRoot, true)
}

// prepareDst makes sure dst is an empty directory, creating it when it
// does not exist (created is then true).
func prepareDst(dst string) (created bool, err error) {
	fi, err := os.Stat(dst)
	if errors.Is(err, fs.ErrNotExist) {
		err := os.Mkdir(dst, 0o755)
		if errors.Is(err, fs.ErrNotExist) {
			return false, berth.Errorf(berth.EInvalid, "the destination's parent directory does not exist")
		}
		if err != nil {
			return false, berth.WrapError(berth.EInternal, err, "cannot create destination")
		}
		return true, nil
	}
	if err != nil {
		return false, berth.WrapError(berth.EInternal, err, "cannot open destination")
	}
	if !fi.IsDir() {
		return false, berth.Errorf(berth.EInvalid, "the destination is not a directory")
	}
	d, err := os.Open(dst)
	if err != nil {
		return false, berth.WrapError(berth.EInternal, err, "cannot open destination")
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return false, berth.Errorf(berth.EConflict, "the destination directory is not empty")
	}
	return false, nil
}

// moveUp moves every entry of the directory tmpName up into dstRoot, after
// checking that dstRoot holds nothing else. If a move fails, the entries
// already moved are moved back.
func moveUp(dstRoot *os.Root, tmpName string) error {
	names, err := readDirNames(dstRoot, ".")
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot read destination")
	}
	if len(names) != 1 || names[0] != tmpName {
		return berth.Errorf(berth.EConflict, "the destination directory was written to during the restore")
	}
	names, err = readDirNames(dstRoot, tmpName)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot read restore directory")
	}
	for i, name := range names {
		if err := dstRoot.Rename(tmpName+"/"+name, name); err != nil {
			for _, done := range names[:i] {
				_ = dstRoot.Rename(done, tmpName+"/"+done)
			}
			return berth.WrapError(berth.EInternal, err, "cannot move restored files into place")
		}
	}
	return nil
}

// readDirNames returns the names in the directory name of root.
func readDirNames(root *os.Root, name string) ([]string, error) {
	d, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// extractor writes the entries of a tar stream below its root, which must
// start empty.
type extractor struct {
	ctx     context.Context
	root    *os.Root
	opts    Options
	bytes   int64             // regular file bytes so far
	entries int               // entries so far
	seen    map[string]bool   // names of the entries so far
	links   map[string]string // symlinks so far: name → target
	dirs    []dirMeta         // directories, to finish once all is written
}

// dirMeta is what a directory gets once everything below it is written.
type dirMeta struct {
	name         string
	mode         fs.FileMode
	atime, mtime time.Time
}

// extract writes every entry of r, then checks that no symlink resolves
// outside the root.
func (x *extractor) extract(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.readError(err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, isRoot, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if isRoot {
			continue
		}
		x.entries++
		if x.entries > x.opts.MaxEntries {
			return berth.Errorf(berth.ETooLarge, "snapshot has more than the %d entry limit", x.opts.MaxEntries)
		}
		if x.seen[name] {
			return berth.Errorf(berth.EInvalid, "archive entry %s appears twice", quote(name))
		}
		x.seen[name] = true
		if link := x.linkAbove(name); link != "" {
			return berth.Errorf(berth.EInvalid, "archive entry %s lies below the symlink %s", quote(name), quote(link))
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = x.dir(h, name)
		case tar.TypeReg:
			err = x.file(tr, h, name)
		case tar.TypeSymlink:
			err = x.symlink(h, name)
		case tar.TypeLink:
			err = berth.Errorf(berth.EInvalid, "archive entry %s is a hard link", quote(name))
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			err = berth.Errorf(berth.EInvalid, "archive entry %s is a device or FIFO", quote(name))
		default:
			err = berth.Errorf(berth.EInvalid, "archive entry %s has unsupported type %q", quote(name), h.Typeflag)
		}
		if err != nil {
			return err
		}
	}
	names := make([]string, 0, len(x.links))
	for name := range x.links {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if linkcheck.Escapes(x.root, name, x.links[name]) {
			return berth.Errorf(berth.EInvalid, "archive symlink %s resolves outside the destination", quote(name))
		}
	}
	return nil
}

// entryName checks and cleans the name of an archive entry. isRoot reports
// a name for the root itself ("." or "./"), which is skipped.
func entryName(raw string) (name string, isRoot bool, err error) {
	switch {
	case raw == "":
		return "", false, berth.Errorf(berth.EInvalid, "archive entry has an empty name")
	case strings.HasPrefix(raw, "/"):
		return "", false, berth.Errorf(berth.EInvalid, "archive entry %s has an absolute name", quote(raw))
	case strings.ContainsRune(raw, 0):
		return "", false, berth.Errorf(berth.EInvalid, "archive entry %s has a NUL in its name", quote(raw))
	case slices.Contains(strings.Split(raw, "/"), ".."):
		return "", false, berth.Errorf(berth.EInvalid, "archive entry %s has a \"..\" in its name", quote(raw))
	}
	name = path.Clean(raw)
	if name == "." {
		return "", true, nil
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return "", false, berth.Errorf(berth.EInvalid, "archive entry %s has a name outside the destination", quote(raw))
	}
	return name, false, nil
}

// linkAbove returns the symlink among the archive's that is a parent of
// name, or "".
func (x *extractor) linkAbove(name string) string {
	for i := range len(name) {
		if name[i] == '/' {
			if _, ok := x.links[name[:i]]; ok {
				return name[:i]
			}
		}
	}
	return ""
}

// parent creates the parent directories of name.
func (x *extractor) parent(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := x.root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return fsError(err, name)
		}
	}
	return nil
}

// dir creates the directory name; its mode and times are set by finishDirs.
func (x *extractor) dir(h *tar.Header, name string) error {
	if err := x.parent(name); err != nil {
		return err
	}
	err := x.root.Mkdir(filepath.FromSlash(name), 0o755)
	if errors.Is(err, fs.ErrExist) {
		// Made earlier as the parent of an entry: fine if a directory.
		if fi, lerr := x.root.Lstat(filepath.FromSlash(name)); lerr != nil || !fi.IsDir() {
			return fsError(err, name)
		}
	} else if err != nil {
		return fsError(err, name)
	}
	x.dirs = append(x.dirs, dirMeta{name: name, mode: fs.FileMode(h.Mode) & fs.ModePerm, atime: h.AccessTime, mtime: h.ModTime})
	return nil
}

// file creates the regular file name (it must not exist) with the entry's
// content, mode and times.
func (x *extractor) file(tr *tar.Reader, h *tar.Header, name string) error {
	if h.Size > x.opts.MaxBytes-x.bytes {
		return berth.Errorf(berth.ETooLarge, "snapshot is larger than the %d byte limit", x.opts.MaxBytes)
	}
	x.bytes += h.Size
	if err := x.parent(name); err != nil {
		return err
	}
	f, err := x.root.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fsError(err, name)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		n, rerr := tr.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return berth.WrapError(berth.EInternal, err, "cannot write restored file")
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return x.readError(rerr)
		}
	}
	if err := f.Chmod(fs.FileMode(h.Mode) & fs.ModePerm); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot set restored file mode")
	}
	if err := f.Close(); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot write restored file")
	}
	if err := x.root.Chtimes(filepath.FromSlash(name), h.AccessTime, h.ModTime); err != nil {
		return fsError(err, name)
	}
	return nil
}

// symlink creates the symlink name, refusing a target that is absolute or
// leaves the root lexically; extract checks the real resolution at the end.
func (x *extractor) symlink(h *tar.Header, name string) error {
	target := h.Linkname
	switch {
	case target == "" || strings.ContainsRune(target, 0):
		return berth.Errorf(berth.EInvalid, "archive symlink %s has an invalid target", quote(name))
	case path.IsAbs(target):
		return berth.Errorf(berth.EInvalid, "archive symlink %s points to an absolute path", quote(name))
	case linkcheck.LexicallyEscapes(name, target):
		return berth.Errorf(berth.EInvalid, "archive symlink %s points outside the destination", quote(name))
	}
	if err := x.parent(name); err != nil {
		return err
	}
	if err := x.root.Symlink(target, filepath.FromSlash(name)); err != nil {
		return fsError(err, name)
	}
	x.links[name] = target
	return nil
}

// finishDirs sets the mode and times of the directories, deepest first so
// that a read-only directory does not stop its children's: the top-level
// ones (top) or all others.
func (x *extractor) finishDirs(root *os.Root, top bool) error {
	dirs := slices.Clone(x.dirs)
	slices.SortStableFunc(dirs, func(a, b dirMeta) int {
		return strings.Count(b.name, "/") - strings.Count(a.name, "/")
	})
	for _, d := range dirs {
		if strings.Contains(d.name, "/") == top {
			continue
		}
		name := filepath.FromSlash(d.name)
		if err := root.Chmod(name, d.mode); err != nil {
			return berth.WrapError(berth.EInternal, err, "cannot set restored directory mode")
		}
		if err := root.Chtimes(name, d.atime, d.mtime); err != nil {
			return fsError(err, d.name)
		}
	}
	return nil
}

// readError classifies an error reading the archive: ctx's as is, anything
// else as a malformed archive.
func (x *extractor) readError(err error) error {
	if cerr := x.ctx.Err(); cerr != nil {
		return cerr
	}
	return berth.WrapError(berth.EInvalid, err, "snapshot archive is malformed")
}

// fsError classifies an error creating the entry name: berth.EInvalid when
// the archive is to blame (a clash with an earlier entry, a path os.Root
// refuses, a bad name or time), berth.EInternal otherwise.
func fsError(err error, name string) error {
	switch {
	case errors.Is(err, fs.ErrExist),
		errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ELOOP),
		errors.Is(err, syscall.ENAMETOOLONG),
		errors.Is(err, syscall.EINVAL),
		errors.Is(err, syscall.ERANGE),
		strings.Contains(err.Error(), "path escapes from parent"):
		return berth.WrapError(berth.EInvalid, err, "archive entry %s cannot be extracted", quote(name))
	}
	return berth.WrapError(berth.EInternal, err, "cannot extract archive entry %s", quote(name))
}

// quote returns name quoted for a message, cut to a readable length.
func quote(name string) string {
	const limit = 120
	if len(name) > limit {
		return fmt.Sprintf("%q…", name[:limit])
	}
	return fmt.Sprintf("%q", name)
}
