package bwrap

import (
	"errors"
	"path"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Bringing the view of /etc up to date at Open is a hundred-odd system
// calls (a stat of each entry and of its copy), half a millisecond on a
// bwrap create's path. A shim that waits for its job brings it up to date
// ahead, watching /etc (and the directories of the entries below it) with
// inotify from before it looks; Open takes those mounts when no event came
// since, and brings the view up to date itself otherwise. The view is
// then exactly as fresh as one brought up to date at Open: an edit of
// /etc that is over before Open has queued its event by then.

// viewWatchMask is every change of a watched directory's entries, or of
// the directory itself, that could change the view.
const viewWatchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE |
	unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// viewAhead is the view brought up to date ahead: its mounts, and the
// inotify instance that says whether /etc changed since.
type viewAhead struct {
	etc, view string
	ms        mounts
	fd        int
	// ending ends the watch once; ended waits for it.
	ending sync.Once
	ended  sync.WaitGroup
}

// makeViewAhead brings the view in view up to date with the entries of
// etc (the host's /etc; another directory in tests), watching etc first;
// nil when either cannot be done (Open does it all then).
func makeViewAhead(etc, view string, entries []string) *viewAhead {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	for _, d := range watchedDirs(etc, entries) {
		// A directory below etc that is missing now is made there: an
		// event of etc's.
		if _, err := unix.InotifyAddWatch(fd, d, viewWatchMask); err != nil && (d == etc || !errors.Is(err, unix.ENOENT)) {
			_ = unix.Close(fd)
			return nil
		}
	}
	ms, err := refreshView(etc, view, entries)
	if err != nil {
		_ = unix.Close(fd)
		return nil
	}
	return &viewAhead{etc: etc, view: view, ms: ms, fd: fd}
}

// watchedDirs are etc and the directories of the entries below it.
func watchedDirs(etc string, entries []string) []string {
	dirs := []string{etc}
	for _, e := range entries {
		if d, _, ok := strings.Cut(e, "/"); ok && !slices.Contains(dirs, path.Join(etc, d)) {
			dirs = append(dirs, path.Join(etc, d))
		}
	}
	return dirs
}

// take returns the mounts of the view brought up to date ahead when it
// is the view of etc in view and nothing changed since, and ends the
// watch either way (see end).
func (v *viewAhead) take(etc, view string) (mounts, bool) {
	var buf [unix.SizeofInotifyEvent + unix.NAME_MAX + 1]byte
	n, err := unix.Read(v.fd, buf[:])
	v.end()
	if n > 0 || !errors.Is(err, unix.EAGAIN) || v.etc != etc || v.view != view {
		return nil, false
	}
	return slices.Clone(v.ms), true
}

// end ends the watch in the background: closing an inotify instance
// waits out a grace period of the kernel's (10-15 ms here), which must
// not hold up the sandbox's start. wait waits for it.
func (v *viewAhead) end() {
	v.ending.Do(func() { v.ended.Go(func() { _ = unix.Close(v.fd) }) })
}

// wait waits until the watch end began has ended.
func (v *viewAhead) wait() { v.ended.Wait() }
