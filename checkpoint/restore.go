package checkpoint

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// Result says what a restore changed.
type Result struct {
	// Written counts the files, directories and symlinks created or
	// rewritten; Removed those deleted.
	Written int `json:"written"`
	Removed int `json:"removed"`
	// Conflicts lists the paths that could not be restored (a skipped
	// file in the way), which were left as they are.
	Conflicts []Skip `json:"conflicts,omitempty"`
}

// restorer applies one manifest to a workspace.
type restorer struct {
	ctx  context.Context
	s    *Store
	m    *manifest
	root *os.Root
	hide []fs.FileInfo
	// dirs caches directories opened, by path: at most maxOpenDirs
	// besides those above the one being opened.
	dirs   map[string]*os.Root
	asRoot bool
	// wsUID and wsGID own the workspace: an imported path's owner
	// (OwnerUnknown) when the daemon is root.
	wsUID, wsGID int
	res          Result
}

// Restore makes the workspace what the checkpoint id of sessionID
// recorded: files and symlinks created since are removed, changed ones
// rewritten, deleted ones recreated, with their modes (and owners, when
// the daemon runs as root). What a checkpoint skips (.git, .gitignore'd
// paths, files over the limits, special files, the hidden paths) is left
// as it is. It never follows a symlink: every directory is opened one
// component at a time and checked to be the one its name names, and every
// file is written to a fresh name and renamed over the old one, so a link
// planted in the workspace is replaced, never written through. Restoring
// into an empty directory copies the checkpoint (a fork). An error can
// leave the workspace part restored; restoring again finishes it.
func (s *Store) Restore(ctx context.Context, sessionID, id, workspace string, hide ...string) (*Result, error) {
	// A commit in flight ends first; no sweep removes a blob while it is
	// copied (the session's delete may run meanwhile: its sweep waits).
	if !ids.ValidName(sessionID) {
		return nil, berth.Errorf(berth.ENotFound, "no checkpoint %s", id)
	}
	unlock := s.lockSession(sessionID)
	s.gc.RLock()
	m, err := s.readManifest(sessionID, id)
	unlock()
	defer s.gc.RUnlock()
	if err != nil {
		return nil, err
	}
	root, err := openWorkspace(workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	r := &restorer{ctx: ctx, s: s, m: m, root: root, dirs: map[string]*os.Root{}, asRoot: os.Geteuid() == 0}
	if r.asRoot {
		fi, err := root.Stat(".")
		if err != nil {
			return nil, berth.WrapError(berth.EInternal, err, "cannot restore the workspace")
		}
		st := fi.Sys().(*syscall.Stat_t)
		r.wsUID, r.wsGID = int(st.Uid), int(st.Gid)
	}
	for _, p := range hide {
		if fi, err := os.Stat(p); err == nil {
			r.hide = append(r.hide, fi)
		}
	}
	defer r.closeDirs()
	if err := r.run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var be *berth.Error
		if errors.As(err, &be) {
			return nil, err
		}
		return nil, berth.WrapError(berth.EInternal, err, "cannot restore the workspace")
	}
	return &r.res, nil
}

// run scans the workspace, removes what the checkpoint lacks, writes what
// differs, then sets the directories' modes.
func (r *restorer) run() error {
	cur := map[string]Entry{}
	w := &walker{ctx: r.ctx, root: r.root, opts: r.s.opts, hide: r.hide, fn: func(v *visit) (bool, string, error) {
		cur[v.entry.Path] = v.entry
		return true, "", nil
	}}
	if err := w.walkDir(r.root, ".", ""); err != nil {
		return err
	}
	var extra []string
	for p, c := range cur {
		if e := r.m.byPath[p]; e == nil || e.Kind != c.Kind {
			extra = append(extra, p)
		}
	}
	// Children before their parents.
	slices.SortFunc(extra, func(a, b string) int { return strings.Compare(b, a) })
	for _, p := range extra {
		if err := r.remove(p, cur[p].Kind == KindDir); err != nil {
			return err
		}
	}
	// Directories removed above may be cached.
	r.closeDirs()
	for i := range r.m.entries {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		e := &r.m.entries[i]
		c, had := cur[e.Path]
		var err error
		switch e.Kind {
		case KindDir:
			err = r.dir(e)
		case KindFile:
			if had && c.Kind == KindFile && c.sameStat(e) && c.UID == e.UID && c.GID == e.GID {
				continue // the very file the checkpoint read, untouched since
			}
			err = r.file(e)
		case KindSymlink:
			err = r.symlink(e, had && c.Kind == KindSymlink)
		}
		if err != nil {
			return err
		}
	}
	// Modes last, deepest first: a read-only directory is filled before it
	// is made read-only.
	for i := len(r.m.entries) - 1; i >= 0; i-- {
		e := &r.m.entries[i]
		if e.Kind != KindDir {
			continue
		}
		d, err := r.open(e.Path)
		if err != nil {
			if errors.Is(err, errConflict) {
				continue
			}
			return err
		}
		f, err := d.Open(".")
		if err != nil {
			return err
		}
		err = f.Chmod(fs.FileMode(e.Mode) & fs.ModePerm)
		if err == nil && r.asRoot {
			err = f.Chown(r.owner(e))
		}
		_ = f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// errConflict marks a path that something left alone stands in the way of.
var errConflict = errors.New("a skipped path is in the way")

// owner is whom the restored e belongs to: its owner as recorded, or the
// workspace's for a path imported from another node, whose owner there
// means nothing here (the agent's sandbox gave the workspace to its user).
func (r *restorer) owner(e *Entry) (uid, gid int) {
	if e.UID == OwnerUnknown {
		return r.wsUID, r.wsGID
	}
	return e.UID, e.GID
}

// conflict records a path left as it is.
func (r *restorer) conflict(p string) {
	if len(r.res.Conflicts) < MaxListedSkips {
		r.res.Conflicts = append(r.res.Conflicts, Skip{Path: p, Reason: "in_the_way"})
	}
}

// open returns the directory p of the workspace, opened one component at a
// time, never through a symlink.
func (r *restorer) open(p string) (*os.Root, error) {
	if p == "." {
		return r.root, nil
	}
	if d := r.dirs[p]; d != nil {
		return d, nil
	}
	parent, err := r.open(path.Dir(p))
	if err != nil {
		return nil, err
	}
	d, err := openDir(parent, path.Base(p), nil)
	if errors.Is(err, errSwapped) || errors.Is(err, fs.ErrNotExist) {
		return nil, errConflict
	}
	if err != nil {
		return nil, err
	}
	if st, err := d.Stat("."); err != nil || r.isHidden(st) {
		_ = d.Close()
		return nil, errConflict
	}
	if len(r.dirs) >= maxOpenDirs {
		r.evict(p)
	}
	r.dirs[p] = d
	return d, nil
}

// parentDir opens the directory e goes in; nil (and no error) when a path
// left alone stands in its way, recorded as a conflict: e is left too.
func (r *restorer) parentDir(e *Entry) (*os.Root, error) {
	parent, err := r.open(path.Dir(e.Path))
	if errors.Is(err, errConflict) {
		r.conflict(e.Path)
		return nil, nil
	}
	return parent, err
}

// maxOpenDirs bounds the directories a restore keeps open: a workspace
// of many directories must not take the daemon's descriptors.
const maxOpenDirs = 64

// evict closes the cached directories that are not above p (the ones a
// caller opening p may still hold are; the walk's depth bounds them).
func (r *restorer) evict(p string) {
	for k, d := range r.dirs {
		if !strings.HasPrefix(p, k+"/") {
			_ = d.Close()
			delete(r.dirs, k)
		}
	}
}

// isHidden reports whether fi is a hidden path.
func (r *restorer) isHidden(fi fs.FileInfo) bool {
	for _, h := range r.hide {
		if os.SameFile(fi, h) {
			return true
		}
	}
	return false
}

// closeDirs closes the cached directories.
func (r *restorer) closeDirs() {
	for p, d := range r.dirs {
		_ = d.Close()
		delete(r.dirs, p)
	}
}

// remove deletes the path p (a directory only once empty: what is left in
// it was skipped, and stays).
func (r *restorer) remove(p string, isDir bool) error {
	parent, err := r.open(path.Dir(p))
	if errors.Is(err, errConflict) {
		return nil // its directory went first
	}
	if err != nil {
		return err
	}
	if !isDir && unreadable(parent, path.Base(p)) {
		// The checkpoint could not read it either (a file made before it
		// looks the same): left, like every path a checkpoint skips.
		r.conflict(p)
		return nil
	}
	err = parent.Remove(path.Base(p))
	switch {
	case err == nil:
		r.res.Removed++
	case errors.Is(err, fs.ErrNotExist):
	case isDir && (errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)):
		if e := r.m.byPath[p]; e != nil {
			r.conflict(p)
		}
	default:
		return err
	}
	return nil
}

// unreadable reports whether the regular file name of dir cannot be
// opened for reading for want of permission.
func unreadable(dir *os.Root, name string) bool {
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err == nil {
		_ = f.Close()
	}
	return errors.Is(err, fs.ErrPermission)
}

// dir makes the directory e (mode set later).
func (r *restorer) dir(e *Entry) error {
	parent, err := r.parentDir(e)
	if err != nil || parent == nil {
		return err
	}
	name := path.Base(e.Path)
	fi, err := parent.Lstat(name)
	if err == nil && fi.IsDir() {
		// Writable while it is filled (the agent may have made it read
		// only); its mode is set at the end.
		if fi.Mode().Perm()&0o700 != 0o700 {
			if d, err := r.open(e.Path); err == nil {
				if f, err := d.Open("."); err == nil {
					_ = f.Chmod(fi.Mode().Perm() | 0o700)
					_ = f.Close()
				}
			}
		}
		return nil
	}
	if err == nil {
		// A skipped file stands where the directory was: the checkpoint wins.
		if err := parent.Remove(name); err != nil {
			r.conflict(e.Path)
			return nil
		}
	}
	if err := parent.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	r.res.Written++
	return nil
}

// tempName is a fresh name in a directory of the workspace.
func tempName() string { return ".berth-rewind-" + strings.ToLower(rand.Text()) }

// file writes e's content to a fresh file beside it, checked against its
// hash, and renames it over e's path.
func (r *restorer) file(e *Entry) error {
	parent, err := r.parentDir(e)
	if err != nil || parent == nil {
		return err
	}
	blob, err := os.Open(r.s.blobPath(e.Hash))
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "a checkpoint blob is missing")
	}
	defer blob.Close()
	tmp := tempName()
	f, err := parent.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = parent.Remove(tmp)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(blob, e.Size+1))
	if err != nil {
		return err
	}
	if n != e.Size || hex.EncodeToString(h.Sum(nil)) != e.Hash {
		return berth.Errorf(berth.EInternal, "a checkpoint blob is damaged")
	}
	if err := f.Chmod(fs.FileMode(e.Mode) & fs.ModePerm); err != nil {
		return err
	}
	if r.asRoot {
		if err := f.Chown(r.owner(e)); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	mt := time.Unix(0, e.MTime)
	_ = parent.Chtimes(tmp, mt, mt)
	if err := parent.Rename(tmp, path.Base(e.Path)); err != nil {
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			_ = parent.Remove(tmp)
			ok = true
			r.conflict(e.Path)
			return nil
		}
		return err
	}
	ok = true
	r.res.Written++
	return nil
}

// symlink makes e's link, replacing whatever is at its path by rename,
// unless the link there already has its target.
func (r *restorer) symlink(e *Entry, isLink bool) error {
	parent, err := r.parentDir(e)
	if err != nil || parent == nil {
		return err
	}
	name := path.Base(e.Path)
	if isLink {
		if t, err := parent.Readlink(name); err == nil && t == e.Target {
			return nil
		}
	}
	tmp := tempName()
	if err := parent.Symlink(e.Target, tmp); err != nil {
		return err
	}
	if r.asRoot {
		uid, gid := r.owner(e)
		_ = parent.Lchown(tmp, uid, gid)
	}
	if err := parent.Rename(tmp, name); err != nil {
		_ = parent.Remove(tmp)
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			r.conflict(e.Path)
			return nil
		}
		return err
	}
	r.res.Written++
	return nil
}
