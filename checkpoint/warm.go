package checkpoint

import (
	"context"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// Warm is a checkpoint captured ahead of the turn it will be of — at the
// end of the turn before, off the next prompt's path — with an inotify
// watch on every directory its walk listed. When the next turn starts,
// Take makes it that turn's Pending in microseconds if nothing in the
// workspace changed since its walk began, and else says it is stale (the
// caller captures then, as without it). A Warm holds no lock: the
// session's other checkpoint work goes on meanwhile, and anything that
// could make it wrong (a checkpoint committed or deleted, blobs swept, a
// write in the workspace) makes it stale.
type Warm struct {
	s *Store
	// wt is the store's watcher its watches are in.
	wt              *watcher
	tree, sessionID string
	// dirty is set by the watcher when a watched directory changes, and
	// changed closed then.
	dirty   atomic.Bool
	changed chan struct{}

	mu sync.Mutex
	// c, w and meta are the walk's result (c nil once taken or closed);
	// prev the manifest it compared with, sweeps the store's count of
	// exclusive gc holds when it began.
	c      *creator
	w      *walker
	meta   *Checkpoint
	prev   *manifest
	sweeps uint64
	// wds are its watches; linked is set when it kept a file with more
	// than one link, whose writes through another name no directory
	// watch sees.
	wds    []int32
	linked bool
	closed bool
}

// WarmIn captures the workspace of sessionID (of the tree whose root is
// tree) ahead of its next turn, a bounded number of walks of the store at a time;
// ctx cancels it (while it waits too). Close must follow, whether or not
// Take took it.
func (s *Store) WarmIn(ctx context.Context, tree, sessionID, workspace string, hide ...string) (*Warm, error) {
	select {
	case s.warmSem <- struct{}{}:
		defer func() { <-s.warmSem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	wt, err := s.watcher()
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot watch the workspace")
	}
	root, err := s.openFor(tree, sessionID, workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	wm := &Warm{s: s, wt: wt, tree: tree, sessionID: sessionID, changed: make(chan struct{})}
	// Read between sweeps: one running now has removed what it removes.
	s.gc.RLock()
	wm.sweeps = s.sweeps.Load()
	s.gc.RUnlock()
	c, w, meta, err := s.walkInto(ctx, root, sessionID, "", hide, func(w *walker) {
		// Each directory is watched before it is listed: a change after
		// its listing marks the capture, one before is in it.
		w.onDir = func(d *os.File) error {
			wd, err := wt.add(wm, d)
			if err != nil {
				return berth.WrapError(berth.EUnavailable, err, "cannot watch the workspace")
			}
			wm.wds = append(wm.wds, wd)
			return nil
		}
		w.onFile = func(fi fs.FileInfo) {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				wm.linked = true
			}
		}
	})
	if err != nil {
		wt.remove(wm, wm.wds)
		return nil, err
	}
	wm.c, wm.w, wm.meta, wm.prev = c, w, meta, c.prevManifest
	s.warmLive.Add(1)
	s.warmMade.Add(1)
	return wm, nil
}

// Take returns the checkpoint of turnID from the warm capture, as Capture
// would, when the workspace is still as its walk found it; ok is false
// when it is stale (or taken, or closed). It takes the session's lock and
// gc as Capture does, until the Pending's Commit or Abort.
func (wm *Warm) Take(turnID string) (_ *Pending, ok bool) {
	s := wm.s
	unlockSession := s.lockSession(wm.sessionID)
	s.gc.RLock()
	unlock := func() { s.gc.RUnlock(); unlockSession() }
	wm.mu.Lock()
	defer wm.mu.Unlock()
	if wm.closed || wm.c == nil || wm.linked || !wm.fresh() || s.previous(wm.sessionID) != wm.prev {
		unlock()
		return nil, false
	}
	meta := *wm.meta
	meta.ID, meta.TurnID, meta.CreatedAt = ids.New(idPrefix), turnID, time.Now().UTC()
	p := &Pending{s: s, tree: wm.tree, c: wm.c, w: wm.w, prev: wm.prev, meta: &meta, unlock: unlock}
	wm.c = nil
	s.warmLive.Add(-1)
	s.warmTaken.Add(1)
	return p, true
}

// fresh reports whether no sweep ran and nothing watched changed since
// the walk began (the watcher's queue drained first; a closed watcher
// sees nothing more).
func (wm *Warm) fresh() bool {
	return wm.s.sweeps.Load() == wm.sweeps && wm.wt.sync() && !wm.dirty.Load()
}

// Changed is closed once the workspace is seen to change since the
// capture's walk began: the capture is stale.
func (wm *Warm) Changed() <-chan struct{} { return wm.changed }

// markDirty makes the capture stale.
func (wm *Warm) markDirty() {
	if wm.dirty.CompareAndSwap(false, true) {
		close(wm.changed)
	}
}

// Close drops the capture's watches and, unless Take took it, its
// temporary blobs.
func (wm *Warm) Close() {
	wm.mu.Lock()
	if wm.closed {
		wm.mu.Unlock()
		return
	}
	wm.closed = true
	c, wds := wm.c, wm.wds
	wm.c, wm.wds = nil, nil
	wm.mu.Unlock()
	if c != nil {
		c.discard()
		wm.s.warmLive.Add(-1)
	}
	wm.wt.remove(wm, wds)
}

// WarmStats counts a store's warm captures.
type WarmStats struct {
	// Kept are the captures kept now, Made all ever made, Taken those a
	// turn took.
	Kept, Made, Taken int64
}

// WarmStats reports the store's warm captures.
func (s *Store) WarmStats() WarmStats {
	return WarmStats{Kept: s.warmLive.Load(), Made: s.warmMade.Load(), Taken: s.warmTaken.Load()}
}
