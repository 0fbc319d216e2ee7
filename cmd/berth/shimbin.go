package main

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/cmd/berth/internal/childentry"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/sandbox/local"
	"github.com/berth-sh/berth/shim"
)

//go:generate go run ../../internal/genshim -o shimbin/berth-shim

// shimDir is the directory the small shim is built into before berth is
// (see shimbin/README.md); it always holds the README.
//
//go:embed shimbin
var shimDir embed.FS

// shimImage is a shim program to install: its SHA-256, and where its bytes
// are, read only when they must be written (a daemon that finds its shim
// in place never pages the embedded copy in).
type shimImage struct {
	sum  [32]byte
	fsys fs.FS
	name string
}

// embeddedShim is the small shim program this berth carries; false when
// it was built without `go generate ./cmd/berth`.
func embeddedShim() (shimImage, bool) {
	const name = "shimbin/berth-shim"
	img := shimImage{fsys: shimDir, name: name}
	if _, err := fs.Stat(shimDir, name); err != nil {
		return img, false
	}
	// The generator writes the hash beside the program; without it, the
	// program is read to hash it.
	if b, err := shimDir.ReadFile(name + ".sha256"); err == nil {
		if n, err := hex.Decode(img.sum[:], bytes.TrimSpace(b)); err == nil && n == len(img.sum) {
			return img, true
		}
	}
	f, err := shimDir.Open(name)
	if err != nil {
		return img, false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return img, false
	}
	copy(img.sum[:], h.Sum(nil))
	return img, true
}

// shimPrefix starts the name of every extracted shim in $BERTH_HOME/bin.
const shimPrefix = "berth-shim-"

// installShim makes sure home/bin/berth-shim-<hash> is img, owned by us,
// 0700 and not a symlink, and returns its path. A file already there is
// used only when it passes those checks and has img's hash; anything else
// at that path (a symlink, a file of another owner, a tampered one) is
// replaced, never followed or run. The directory must be ours and private.
func installShim(home string, img shimImage) (string, error) {
	dir := filepath.Join(home, "bin")
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", berth.WrapError(berth.EInternal, err, "create %s", dir)
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	// A home on a noexec filesystem could hold the shim but not run it.
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Flags&unix.ST_NOEXEC != 0 {
		return "", berth.Errorf(berth.EUnavailable, "%s is on a filesystem mounted noexec", dir)
	}
	path := filepath.Join(dir, shimPrefix+hex.EncodeToString(img.sum[:])[:16])
	if sameFile(path, img.sum) {
		return path, nil
	}
	return path, writeShim(dir, path, img)
}

// privateDir checks that dir is a directory (not a symlink to one) of
// ours that no one else can enter or write.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "check %s", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o077 != 0 {
		return berth.Errorf(berth.EForbidden, "%s must be a directory of this user with mode 0700 (it is %s)", dir, fi.Mode())
	}
	return nil
}

// sameFile reports whether path is a regular file (not a symlink) of
// ours, 0700, whose content has the hash sum.
func sameFile(path string, sum [32]byte) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm() != 0o700 {
		return false
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	return bytes.Equal(h.Sum(nil), sum[:])
}

// writeShim writes img to path whole or not at all: a temp file in dir,
// checked against the hash, renamed over whatever path was (the name is
// replaced, a symlink there is not followed).
//
// Nothing is synced: a shim torn by a power loss is found at the next
// start, before anything runs it, since installShim runs a file only
// once its bytes have img's hash — and 3 MB synced would hold up the
// store's own syncs at a new home's start.
func writeShim(dir, path string, img shimImage) error {
	src, err := img.fsys.Open(img.name)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "read the shim")
	}
	defer src.Close()
	f, err := os.CreateTemp(dir, "."+shimPrefix+"*")
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "write the shim")
	}
	tmp := f.Name()
	err = f.Chmod(0o700)
	h := sha256.New()
	if err == nil {
		_, err = io.Copy(io.MultiWriter(f, h), src)
	}
	if err == nil && !bytes.Equal(h.Sum(nil), img.sum[:]) {
		err = berth.Errorf(berth.EInternal, "the shim's bytes do not have its hash (rebuild with go generate ./cmd/berth)")
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return berth.WrapError(berth.EInternal, err, "write the shim %s", path)
	}
	return nil
}

// removeOldShims removes the shims of other berth versions (and temp
// files of an interrupted write) in home/bin that no live process runs,
// keeping keep. It returns how many it removed.
func removeOldShims(home, keep string) int {
	dir := filepath.Join(home, "bin")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var old []string
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		if p != keep && (strings.HasPrefix(name, shimPrefix) || strings.HasPrefix(name, "."+shimPrefix)) {
			old = append(old, p)
		}
	}
	if len(old) == 0 {
		return 0
	}
	// Only after an upgrade is there anything to remove: then look which
	// programs live processes run (a shim of the old version may still
	// hold a session).
	running := runningExes()
	n := 0
	for _, p := range old {
		if !running[p] && os.Remove(p) == nil {
			n++
		}
	}
	return n
}

// runningExes returns the programs live processes run, by path.
func runningExes() map[string]bool {
	out := map[string]bool{}
	for _, pid := range procfs.PIDs() {
		if exe, err := procfs.Exe(pid); err == nil {
			out[exe] = true
		}
	}
	return out
}

// smallShim installs the small shim this berth carries and returns it as
// the program for host and bwrap sessions' shims; the docker provider
// needs the Docker API client, which only `berth shim` has. A berth built
// without `go generate` (or whose small shim cannot be installed) runs
// `berth shim-local` (self, see internal/childentry) for them instead: the
// same shim, its heap nearly as small, from a bigger program file. Either
// is said once in the log (the small shim at debug).
func smallShim(self, home, options string, logger *slog.Logger) []shim.Program {
	entered := []shim.Program{{Argv: []string{self, childentry.ShimRole, "--options", options}, Providers: local.Names}}
	img, ok := embeddedShim()
	if !ok {
		logger.Info("this berth carries no small shim (built without `go generate ./cmd/berth`): host and bwrap sessions' shims run `berth shim-local`")
		return entered
	}
	path, err := installShim(home, img)
	if err != nil {
		logger.Warn("the small shim cannot be installed: host and bwrap sessions' shims run `berth shim-local`", "err", err)
		return entered
	}
	// Routine at every start: at debug, so that berth serving is the one
	// line a terminal gets (docs/api.md, Transport).
	if n := removeOldShims(home, path); n > 0 {
		logger.Debug("removed shims of other berth versions", "count", n)
	}
	logger.Debug("host and bwrap sessions' shims run the small shim; docker sessions' run `berth shim`", "shim", path)
	return []shim.Program{{Argv: []string{path, "--options", options}, Providers: local.Names}}
}
