// Package wsfiles writes the files a create request gives into the new
// session's workspace (docs/api.md, "Worktrees, files and mounts"):
// checked by name and size before anything is written, then written
// beneath the workspace with openat2, never through a link.
package wsfiles

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// Bounds of a create request's files (docs/api.md, "Worktrees, files and mounts").
const (
	// MaxCreateFiles is how many files one create may write.
	MaxCreateFiles = 100
	// MaxCreateFileBytes caps one file's content.
	MaxCreateFileBytes = 256 << 10
	// MaxCreateFilesBytes caps all the files' content together.
	MaxCreateFilesBytes = 1 << 20
)

// beneath resolves inside the directory a descriptor names only: no "..",
// no absolute path, and no symbolic link anywhere on the way.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// filesError is the 400 a refused file of a create request gets.
func filesError(p, format string, a ...any) error {
	return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("files[%q]: ", p) + fmt.Sprintf(format, a...),
		Details: map[string]any{"field": "files", "path": p}}
}

// Check checks a create request's files by their names and sizes
// alone, before anything is written: relative paths of plain components
// (no "..", ".", empty component, NUL), within the bounds. Over a size
// bound is ETooLarge.
func Check(files map[string]string) error {
	if len(files) > MaxCreateFiles {
		return &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("files: at most %d files", MaxCreateFiles),
			Details: map[string]any{"field": "files"}}
	}
	total := 0
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || len(p) > 4096 {
			return filesError(p, "must be a relative path")
		}
		for _, c := range strings.Split(p, "/") {
			if c == "" || c == "." || c == ".." || len(c) > 255 {
				return filesError(p, "must be a relative path of plain components (no empty, . or .. component)")
			}
		}
		if len(files[p]) > MaxCreateFileBytes {
			return &berth.Error{Code: berth.ETooLarge, Message: fmt.Sprintf("files[%q]: larger than %d bytes", p, MaxCreateFileBytes),
				Details: map[string]any{"field": "files", "path": p, "limit": MaxCreateFileBytes}}
		}
		total += len(files[p])
	}
	if total > MaxCreateFilesBytes {
		return &berth.Error{Code: berth.ETooLarge, Message: fmt.Sprintf("files: larger than %d bytes together", MaxCreateFilesBytes),
			Details: map[string]any{"field": "files", "limit": MaxCreateFilesBytes}}
	}
	return nil
}

// Write writes files (checked by checkFiles) into the workspace ws,
// mode 0644, making missing parent directories 0755. Nothing is followed
// through a symbolic link and nothing leaves ws (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS from ws's descriptor). Every path is
// checked first (a parent that is a link or a file, a target that is a
// directory: 400 naming the path) so that a refusal writes nothing; then
// each file is written to a temporary name beside it and renamed over the
// target, so a reader sees the old content or the new, whole.
func Write(ws string, files map[string]string) error {
	if len(files) == 0 {
		return nil
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "files: open the workspace")
	}
	defer unix.Close(root)
	keys := slices.Sorted(maps.Keys(files))
	for _, p := range keys {
		if err := checkFilePath(root, p); err != nil {
			return err
		}
	}
	for _, p := range keys {
		if err := writeFile(root, p, files[p]); err != nil {
			return err
		}
	}
	return nil
}

// checkFilePath refuses p when what exists of it in root is in the way: a
// parent that is not a directory (a symbolic link included), or a target
// that is a directory.
func checkFilePath(root int, p string) error {
	fd, err := openBeneath(root, p, unix.O_PATH|unix.O_NOFOLLOW)
	if err == nil {
		var st unix.Stat_t
		serr := unix.Fstat(fd, &st)
		unix.Close(fd)
		if serr == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return filesError(p, "is a directory in the workspace")
		}
		return nil
	}
	if errors.Is(err, unix.ENOENT) {
		// Its parents must be directories, or missing.
		dir := path.Dir(p)
		for dir != "." {
			fd, err := openBeneath(root, dir, unix.O_PATH|unix.O_DIRECTORY)
			if err == nil {
				unix.Close(fd)
				return nil
			}
			if !errors.Is(err, unix.ENOENT) {
				return refusedPath(p, err)
			}
			dir = path.Dir(dir)
		}
		return nil
	}
	return refusedPath(p, err)
}

// refusedPath is the 400 for a path that openat2 would not resolve.
func refusedPath(p string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return filesError(p, "goes through a symbolic link in the workspace: refused")
	case errors.Is(err, unix.ENOTDIR):
		return filesError(p, "a parent is not a directory in the workspace")
	}
	return filesError(p, "cannot be written: %v", err)
}

// openBeneath opens p under root with openat2, never through a link.
func openBeneath(root int, p string, flags int) (int, error) {
	return unix.Openat2(root, p, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: beneath})
}

// writeFile writes one file: its parents made, then a temporary file
// beside it renamed over it.
func writeFile(root int, p, content string) error {
	dir, name := path.Dir(p), path.Base(p)
	parent, err := mkdirsBeneath(root, dir)
	if err != nil {
		return refusedPath(p, err)
	}
	defer unix.Close(parent)
	tmp := ".berth-file-" + ids.New("tmp")
	fd, err := openBeneath(parent, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW)
	if err != nil {
		return refusedPath(p, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.WriteString(content)
	if werr == nil {
		// Not the umask's: the contract's mode.
		werr = f.Chmod(0o644)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(parent, tmp, parent, name)
	}
	if werr != nil {
		_ = unix.Unlinkat(parent, tmp, 0)
		if errors.Is(werr, unix.EISDIR) || errors.Is(werr, unix.ENOTEMPTY) || errors.Is(werr, unix.EEXIST) {
			return filesError(p, "is a directory in the workspace")
		}
		return berth.WrapError(berth.EInternal, werr, "files[%q]: write", p)
	}
	return nil
}

// mkdirsBeneath opens dir under root, making each missing directory on
// the way (0755); it returns the directory's descriptor.
func mkdirsBeneath(root int, dir string) (int, error) {
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	if dir == "." {
		return cur, nil
	}
	for _, c := range strings.Split(dir, "/") {
		if err := unix.Mkdirat(cur, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(cur)
			return -1, err
		}
		next, err := openBeneath(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}
