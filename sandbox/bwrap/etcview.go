package bwrap

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The view of /etc. A sandbox sees a few entries of the host's /etc
// (etcEntries). Bound one by one, they were twenty-odd mounts in every
// bwrap, about 2 ms of each start. Instead a provider with Options.EtcView
// keeps one directory, shared by every sandbox it opens, that holds the
// entries as the sandbox sees them, and bwrap binds it at /etc whole:
//
//   - a world-readable regular file of /etc itself (not reached through
//     a link; up to maxViewCopy) is a copy, world-readable too, refreshed
//     at each Open when the host's changed (size, mode or modification
//     time), by rename: a running sandbox sees the new one;
//   - a symbolic link that leads into a system directory the sandbox
//     sees as the host has it (/usr, /opt) is a link to where it leads;
//   - anything else (a directory, a file not every user may read, a link
//     elsewhere, resolv.conf, which a sandbox with network is given its
//     own) is an empty mount point that the host's entry is bound onto,
//     as before; passwd and group are mount points for the sandbox's own.
//
// A mount point is a directory, or a regular file no other user may read
// (no copy is one): running sandboxes may have something mounted on it,
// and a rename or unlink of a mount point would detach those mounts in
// every namespace. So a mount point is never replaced nor removed; an
// entry that became a copy again stays bound through it, and a copy that
// must become a mount point (its file turned private) is emptied in
// place. An entry whose view cannot be made so (a directory where the
// host now has a file) makes the sandbox bind each entry itself.
// Temporary files are made beside the view (dir + ".new"), never in it.

// maxViewCopy bounds a file the view copies; a larger one is bound.
const maxViewCopy = 1 << 20

// viewKind is how one entry reaches the sandbox through the view.
type viewKind int

const (
	// viewAbsent: the host has no such entry.
	viewAbsent viewKind = iota
	// viewCopy: a copy of the host's file.
	viewCopy
	// viewLink: a symbolic link to where the host's leads.
	viewLink
	// viewBindDir and viewBindFile: the host's entry bound onto an
	// empty mount point of that kind.
	viewBindDir
	viewBindFile
)

// viewMountPoints are the view's mount points for files the sandbox is
// given of its own (bwrap --ro-bind-data): always there, whatever the host has.
var viewMountPoints = []string{"passwd", "group", "resolv.conf"}

// errNotCopyable says a file found copyable is not any more.
var errNotCopyable = errors.New("not a world-readable regular file")

// etcMounts are the mounts that give a sandbox its /etc: through the view
// in directory view when there is one and it can be brought up to date,
// else one bind per entry. A view is marked user: a provider that runs
// bwrap as the host uid hands it through the stage (the view lies in the
// daemon's home, which that uid may not cross).
func etcMounts(view string) mounts {
	if view != "" {
		// Brought up to date ahead, by a shim waiting for its job.
		if v := takeWarmView(); v != nil {
			if ms, ok := v.take("/etc", view); ok {
				return ms
			}
		}
		if ms, err := refreshView("/etc", view, etcEntries); err == nil {
			return ms
		}
	}
	ms := mounts{{kind: dir, dst: "/etc"}}
	for _, name := range etcEntries {
		p := filepath.Join("/etc", name)
		if _, err := os.Stat(p); err == nil {
			ms = append(ms, mount{kind: roBind, src: p, dst: p, try: true})
		}
	}
	return ms
}

// refreshView brings the view in dir up to date with the entries of etc
// (the host's /etc; another directory in tests) and returns the mounts
// that give it to a sandbox at /etc: the view, then the entries bound
// onto its mount points. An error leaves the view usable by those made
// before (every change is a rename, a new entry or an emptied copy) but
// not by this one.
func refreshView(etc, dir string, entries []string) (mounts, error) {
	if err := viewDir(dir); err != nil {
		return nil, err
	}
	tmp := dir + ".new"
	if err := os.Mkdir(tmp, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	sweepTemps(tmp)
	for _, name := range viewMountPoints {
		if err := viewMountPoint(filepath.Join(dir, name), false, tmp); err != nil {
			return nil, err
		}
	}
	ms := mounts{{kind: roBind, src: dir, dst: "/etc", user: true}}
	for _, name := range entries {
		src, dst := filepath.Join(etc, name), filepath.Join(dir, name)
		kind, target := classify(src, name)
		if kind != viewAbsent && strings.Contains(name, "/") {
			if err := viewParents(dir, name); err != nil {
				return nil, err
			}
		}
		if (kind == viewCopy || kind == viewLink) && isMountPoint(dst) {
			// A mount point stays one: the host's entry is bound onto it.
			kind = viewBindFile
			if fi, err := os.Stat(src); err == nil && fi.IsDir() {
				kind = viewBindDir
			}
		}
		var err error
		switch kind {
		case viewAbsent:
			if !slices.Contains(viewMountPoints, name) {
				err = viewRemove(dst)
			}
		case viewCopy:
			if err = viewCopyFile(src, dst, tmp); errors.Is(err, errNotCopyable) {
				kind = viewBindFile
				err = viewMountPoint(dst, false, tmp)
			}
		case viewLink:
			err = viewLinkTo(target, dst, tmp)
		case viewBindDir, viewBindFile:
			err = viewMountPoint(dst, kind == viewBindDir, tmp)
		}
		if err != nil {
			return nil, fmt.Errorf("the view of /etc/%s: %w", name, err)
		}
		if kind == viewBindDir || kind == viewBindFile {
			ms = append(ms, mount{kind: roBind, src: src, dst: filepath.Join("/etc", name), try: true})
		}
	}
	sweepView(dir, entries)
	return ms, nil
}

// classify says how the host's entry src (called name in /etc) reaches
// the sandbox; target is a viewLink's. Nothing is read through a link
// but into the system directories: a root daemon reads as root, and the
// sandbox's uid might not pass where the link leads.
func classify(src, name string) (viewKind, string) {
	lfi, err := os.Lstat(src)
	if err != nil {
		return viewAbsent, ""
	}
	if name == "resolv.conf" {
		// A sandbox with network has its own bound over it.
		return viewBindFile, ""
	}
	fi := lfi
	if lfi.Mode()&os.ModeSymlink != 0 {
		if target, err := filepath.EvalSymlinks(src); err == nil && inSystemDir(target) {
			return viewLink, target
		}
		if fi, err = os.Stat(src); err != nil {
			return viewAbsent, ""
		}
	}
	switch {
	case fi.IsDir():
		return viewBindDir, ""
	case !fi.Mode().IsRegular():
		return viewAbsent, ""
	case lfi.Mode().IsRegular() && copyable(fi):
		return viewCopy, ""
	}
	// Who may read it stays the host's to say.
	return viewBindFile, ""
}

// copyable reports whether the view may hold a copy of the file fi:
// regular, readable by every user, not too large.
func copyable(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0 && fi.Size() <= maxViewCopy
}

// inSystemDir reports whether p lies in a system directory a sandbox
// sees bound as the host has it.
func inSystemDir(p string) bool {
	for _, d := range systemDirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() && within(p, d) {
			return true
		}
	}
	return false
}

// isMountPoint reports whether the view's entry p is a mount point: a
// directory, or a regular file no other user may read.
func isMountPoint(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && (fi.IsDir() || mountPointInfo(fi))
}

// mountPointInfo reports whether fi is a mount point's file: regular, no
// other user may read it (every copy may be).
func mountPointInfo(fi os.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 == 0
}

// viewDir makes p a directory of the view every user may search (the
// sandbox's uid, whoever made it, whatever the umask), or keeps it.
func viewDir(p string) error {
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", p)
	}
	if fi.Mode().Perm() != 0o755 {
		return os.Chmod(p, 0o755)
	}
	return nil
}

// viewParents makes the directories of the view leading to entry name.
func viewParents(dir, name string) error {
	parent := dir
	for _, part := range strings.Split(filepath.Dir(name), "/") {
		parent = filepath.Join(parent, part)
		if err := viewDir(parent); err != nil {
			return err
		}
	}
	return nil
}

// viewMountPoint makes p an empty mount point, a directory or a file
// (mode 0600: no copy has it), or keeps the one there. A copy or a link
// in its way (never mount points) goes: a copy emptied in place, so that
// sandboxes that see it through the view no longer read what the host
// made private.
func viewMountPoint(p string, isDir bool, tmp string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return newMountPoint(p, isDir, tmp)
	}
	if err != nil {
		return err
	}
	switch {
	case fi.IsDir() && isDir:
		return viewDir(p)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory", p)
	case mountPointInfo(fi) && !isDir:
		return nil
	case mountPointInfo(fi):
		return fmt.Errorf("%s is a file", p)
	case fi.Mode().IsRegular() && !isDir:
		if err := os.Truncate(p, 0); err != nil {
			return err
		}
		return os.Chmod(p, 0o600)
	case isDir:
		// A link or a copy where a directory must be: a directory takes no
		// rename over them.
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	// A link the new file replaces at once, or a directory now.
	return newMountPoint(p, isDir, tmp)
}

// newMountPoint makes an empty mount point at p: a directory, or a file
// of mode 0600 put in place by rename.
func newMountPoint(p string, isDir bool, tmp string) error {
	if isDir {
		return viewDir(p)
	}
	return viewReplace(p, tmp, func(t string) error {
		f, err := os.OpenFile(t, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		return f.Close()
	})
}

// viewCopyFile makes dst a copy of src, unless it is one already (same
// size, mode and modification time). src is opened without following a
// link and checked once open (errNotCopyable when it is not copyable
// any more), and read no further than maxViewCopy.
func viewCopyFile(src, dst, tmp string) error {
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return errNotCopyable
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !copyable(fi) {
		return errNotCopyable
	}
	if cur, err := os.Lstat(dst); err == nil {
		if cur.IsDir() {
			// A directory's mount point: never replaced.
			return fmt.Errorf("%s is a directory", dst)
		}
		if cur.Mode().IsRegular() && cur.Size() == fi.Size() && cur.Mode().Perm() == fi.Mode().Perm() && cur.ModTime().Equal(fi.ModTime()) {
			return nil
		}
	}
	return viewReplace(dst, tmp, func(t string) error {
		out, err := os.OpenFile(t, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		// File to file, in the kernel (copy_file_range): through a buffer,
		// the shim's heap would keep the size of /etc's largest files for
		// its whole life.
		n, err := io.Copy(out, io.LimitReader(f, maxViewCopy+1))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if n > maxViewCopy {
			return errNotCopyable
		}
		// The host's mode (the umask is not the host's to say), and its
		// time, which tells the next Open the copy is current.
		if err := os.Chmod(t, fi.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(t, fi.ModTime(), fi.ModTime())
	})
}

// viewLinkTo makes dst a symbolic link to target, unless it is one.
func viewLinkTo(target, dst, tmp string) error {
	cur, err := os.Lstat(dst)
	switch {
	case err == nil && cur.IsDir():
		return fmt.Errorf("%s is a directory", dst)
	case err == nil && cur.Mode()&os.ModeSymlink != 0:
		if got, err := os.Readlink(dst); err == nil && got == target {
			return nil
		}
	}
	return viewReplace(dst, tmp, func(t string) error { return os.Symlink(target, t) })
}

// viewRemove removes a copy or a link of an entry the host no longer
// has; a mount point stays.
func viewRemove(dst string) error {
	fi, err := os.Lstat(dst)
	if err != nil || isMountPoint(dst) {
		return nil
	}
	if !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// sweepView removes what the view holds at its top that is none of the
// entries (an entry an older berth gave): copies and links only.
func sweepView(dir string, entries []string) {
	want := map[string]bool{}
	for _, name := range append(slices.Clone(entries), viewMountPoints...) {
		want[strings.Split(name, "/")[0]] = true
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, de := range des {
		if !want[de.Name()] {
			_ = viewRemove(filepath.Join(dir, de.Name()))
		}
	}
}

// viewTemps numbers this process's temporary names.
var viewTemps atomic.Uint64

// viewReplace makes dst what make makes at a temporary name in tmp (beside
// the view, on its file system), by rename: a sandbox reading dst sees
// the old entry or the new one, whole. Shims of one daemon may refresh
// the view at once: each has its own temporary names.
func viewReplace(dst, tmp string, make func(t string) error) error {
	t := filepath.Join(tmp, strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(viewTemps.Add(1), 10))
	if err := make(t); err != nil {
		_ = os.Remove(t)
		return err
	}
	if err := os.Rename(t, dst); err != nil {
		_ = os.Remove(t)
		return err
	}
	return nil
}

// staleTemp is the age past which a temporary file is a killed shim's.
const staleTemp = 10 * time.Minute

// sweepTemps removes the temporary files of shims killed mid-refresh.
func sweepTemps(tmp string) {
	des, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, de := range des {
		if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(tmp, de.Name()))
		}
	}
}
