package bwrap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// The view of /etc. A sandbox sees a few entries of the host's /etc
// (etcEntries). Bound one by one, they were twenty-odd mounts in every
// bwrap, about 2 ms of each start. Instead a provider with Options.EtcView
// keeps one directory, shared by every sandbox it opens, that holds the
// entries as the sandbox sees them, and bwrap binds it at /etc whole:
//
//   - a world-readable regular file (up to maxViewCopy) is a copy,
//     refreshed at each Open when the host's changed (size, mode or
//     modification time), by rename: a running sandbox sees the new one;
//   - a symbolic link that leads into a system directory the sandbox sees
//     as the host has it (/usr, /opt) is a link to where it leads;
//   - anything else (a directory, a file not every user may read,
//     resolv.conf, which a sandbox with network is given its own) is an
//     empty mount point in the view that the host's entry is bound onto,
//     as before; passwd and group are mount points for the sandbox's own.
//
// The view's own mount points (passwd, group, resolv.conf) and its
// directories are made once and never replaced nor removed: a running
// sandbox has something mounted on them (a rename or unlink of a mount
// point detaches the mounts on it in every namespace). When the view cannot be
// made as the host's /etc now is (an entry changed kind, the directory is
// not writable), the sandbox binds each entry itself.

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

// etcMounts are the mounts that give a sandbox its /etc: through the view
// in directory view when there is one and it can be brought up to date, else one
// bind per entry. A view is marked user: a provider that runs bwrap as
// the host uid hands it through the stage (the view lies in the daemon's
// home, which that uid may not cross).
func etcMounts(view string) mounts {
	if view != "" {
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
// before (every change is a rename or a new entry) but not by this one.
func refreshView(etc, dir string, entries []string) (mounts, error) {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the view of /etc %s is not a directory", dir)
	}
	// Read by the sandbox's uid, whoever made it.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for _, name := range viewMountPoints {
		if err := viewMountPoint(filepath.Join(dir, name), false); err != nil {
			return nil, err
		}
	}
	ms := mounts{{kind: roBind, src: dir, dst: "/etc", user: true}}
	for _, name := range entries {
		src, dst := filepath.Join(etc, name), filepath.Join(dir, name)
		kind, target, fi := classify(src, name)
		if kind != viewAbsent && strings.Contains(name, "/") {
			if err := viewParents(dir, name); err != nil {
				return nil, err
			}
		}
		var err error
		switch kind {
		case viewAbsent:
			if !slices.Contains(viewMountPoints, name) {
				err = viewRemove(dst)
			}
		case viewCopy:
			err = viewCopyFile(src, fi, dst)
		case viewLink:
			err = viewLinkTo(target, dst)
		case viewBindDir, viewBindFile:
			if err = viewMountPoint(dst, kind == viewBindDir); err == nil {
				ms = append(ms, mount{kind: roBind, src: src, dst: filepath.Join("/etc", name), try: true})
			}
		}
		if err != nil {
			return nil, fmt.Errorf("the view of /etc/%s: %w", name, err)
		}
	}
	return ms, nil
}

// classify says how the host's entry src (called name in /etc) reaches
// the sandbox; target is a viewLink's, fi a viewCopy's file.
func classify(src, name string) (viewKind, string, os.FileInfo) {
	fi, err := os.Stat(src)
	if err != nil {
		return viewAbsent, "", nil
	}
	if name == "resolv.conf" {
		// A sandbox with network has its own bound over it.
		return viewBindFile, "", nil
	}
	if lfi, err := os.Lstat(src); err == nil && lfi.Mode()&os.ModeSymlink != 0 {
		if target, err := filepath.EvalSymlinks(src); err == nil && inSystemDir(target) {
			return viewLink, target, nil
		}
	}
	switch {
	case fi.IsDir():
		return viewBindDir, "", nil
	case fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0 && fi.Size() <= maxViewCopy:
		return viewCopy, "", fi
	case fi.Mode().IsRegular():
		// Who may read it stays the host's to say.
		return viewBindFile, "", nil
	}
	return viewAbsent, "", nil
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

// viewParents makes the directories of the view leading to entry name.
func viewParents(dir, name string) error {
	parent := dir
	for _, part := range strings.Split(filepath.Dir(name), "/") {
		parent = filepath.Join(parent, part)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if fi, err := os.Lstat(parent); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", parent)
		}
	}
	return nil
}

// viewMountPoint makes an empty mount point, a directory or a file, at
// p; one already there of that kind is kept as it is.
func viewMountPoint(p string, isDir bool) error {
	fi, err := os.Lstat(p)
	if err == nil {
		if isDir && fi.IsDir() || !isDir && fi.Mode().IsRegular() {
			return nil
		}
		return fmt.Errorf("%s is a %s, not a mount point of the kind the host's entry needs", p, fi.Mode().Type())
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if isDir {
		err = os.Mkdir(p, 0o755)
	} else {
		var f *os.File
		if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			err = f.Close()
		}
	}
	if errors.Is(err, fs.ErrExist) {
		// Another shim made it meanwhile.
		return viewMountPoint(p, isDir)
	}
	return err
}

// viewCopyFile makes dst a copy of src (whose Stat is fi), unless it is
// one already: same size, mode and modification time.
func viewCopyFile(src string, fi os.FileInfo, dst string) error {
	cur, err := os.Lstat(dst)
	switch {
	case err == nil && cur.IsDir():
		// A directory's mount point: never replaced.
		return fmt.Errorf("%s is a directory", dst)
	case err == nil && cur.Mode().IsRegular() && cur.Size() == fi.Size() && cur.Mode().Perm() == fi.Mode().Perm() && cur.ModTime().Equal(fi.ModTime()):
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return viewReplace(dst, func(tmp string) error {
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		// The host's mode (the umask is not the host's to say), and its
		// time, which tells the next Open the copy is current.
		if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
			return err
		}
		return os.Chtimes(tmp, fi.ModTime(), fi.ModTime())
	})
}

// viewLinkTo makes dst a symbolic link to target, unless it is one.
func viewLinkTo(target, dst string) error {
	cur, err := os.Lstat(dst)
	switch {
	case err == nil && cur.IsDir():
		return fmt.Errorf("%s is a directory", dst)
	case err == nil && cur.Mode()&os.ModeSymlink != 0:
		if got, err := os.Readlink(dst); err == nil && got == target {
			return nil
		}
	}
	return viewReplace(dst, func(tmp string) error { return os.Symlink(target, tmp) })
}

// viewRemove removes an entry the host no longer has; a directory (a
// mount point a running sandbox may use) stays, empty.
func viewRemove(dst string) error {
	fi, err := os.Lstat(dst)
	if err != nil || fi.IsDir() {
		return nil
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// viewTemps numbers this process's temporary names in views.
var viewTemps atomic.Uint64

// viewReplace makes dst what make makes at a temporary name beside it,
// by rename: a sandbox reading dst sees the old entry or the new one,
// whole. Shims of one daemon may refresh the view at once: each has its
// own temporary name.
func viewReplace(dst string, make func(tmp string) error) error {
	tmp := filepath.Join(filepath.Dir(dst), ".new-"+filepath.Base(dst)+"-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(viewTemps.Add(1), 10))
	if err := make(tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
