package objstore

import (
	"context"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/snapshot"
)

// Target is what the Syncer writes of one session, as its Resolve finds
// it when the upload starts.
type Target struct {
	// Seq and TurnID are the session's last turn_ended and its turn.
	Seq    int64
	TurnID string
	// Workspace is its managed workspace ("" for a host path: it does not
	// move); Home its private HOME.
	Workspace, Home string
	// Hide are host paths the walks leave out (the daemon's own).
	Hide []string
}

// SyncerOptions configure a Syncer.
type SyncerOptions struct {
	Uploader *Uploader
	// Checkpoints, when set, is the local checkpoint store whose
	// checkpoints of a session are written too.
	Checkpoints *checkpoint.Store
	// Snapshots, when set, is the local snapshot store whose snapshots of
	// a session are written too.
	Snapshots *snapshot.Store
	// Scan bounds the walks of workspaces and HOMEs (the [checkpoints]
	// limits).
	Scan checkpoint.Options
	// Resolve says what to write of session id after its turn turnID
	// ended: ENotFound drops the session (deleted meanwhile).
	Resolve func(ctx context.Context, id, turnID string) (Target, error)
	// Synced records that the store has the session as of seq
	// (storage.synced_seq and synced_at).
	Synced func(ctx context.Context, id string, seq int64, at time.Time) error
	// Warn tells the session why its state is not in the store; called
	// once per failure streak, holding no lock.
	Warn func(id, reason string)
	// Workers bounds the sessions written at once (default 2).
	Workers int
	// Delay is how long after its turn ended a session is written
	// (default DefaultSyncDelay): the turns that end meanwhile are
	// written with it, so that a session running turn after turn is not
	// walked and written after each.
	Delay time.Duration
	// DeletedDir remembers the sessions deleted whose objects are not
	// removed from the store yet (a file each; "": not remembered).
	DeletedDir string
	// MinBackoff and MaxBackoff bound the wait before a failed session is
	// tried again, doubling from one to the other (defaults 1s and 1m).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// Syncer writes sessions' state to the object store in the background,
// at each turn's end (TurnEnded), one session at a time each, the latest
// turn winning over those not written yet. A failure is retried with
// backoff and never reaches the turn. Close stops it.
type Syncer struct {
	opts   SyncerOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// wake is signalled when a session becomes ready; closing is closed
	// by Close.
	wake    chan struct{}
	closing chan struct{}

	// bucket is set once the bucket is known to exist.
	bucket atomic.Bool

	mu       sync.Mutex
	sessions map[string]*syncState
	closed   bool
}

// syncState is one session's place in the Syncer.
type syncState struct {
	// turnID is the latest turn ended; dirty says it is not written yet.
	turnID string
	dirty  bool
	// running: a worker is writing it; retryAt: not before then.
	running bool
	retryAt time.Time
	// since is when the oldest turn not written yet ended.
	since time.Time
	// failures counts the failures in a row; warned says the streak was told.
	failures int
	warned   bool
	lastErr  string
	// synced is when it was last written.
	synced time.Time
	// prevWS and prevHome are the last walks' entries (unchanged files are
	// not read again); ckpts the checkpoints written.
	prevWS, prevHome map[string]checkpoint.Entry
	ckpts            map[string]bool
	listed           bool
	// ckPut is the last checkpoint written (the next is written as the
	// changes since).
	ckPut *PutCheckpoint
	// snaps are the snapshots written; snapsListed says the store's were
	// read.
	snaps       map[string]bool
	snapsListed bool
	// learned says the Uploader learnt where the store's packs hold the
	// session's files (Uploader.Learn).
	learned bool
	// deleting: the session is deleted, its objects are to be removed
	// (Deleted); it is not written again.
	deleting bool
}

// DefaultSyncDelay is SyncerOptions.Delay's default: a second of turns
// written at once (250 ms still cost a session running turn after turn
// on two cores a tenth of its turns' time; BENCHMARKS.md).
const DefaultSyncDelay = time.Second

// NewSyncer starts a Syncer's workers.
func NewSyncer(opts SyncerOptions) *Syncer {
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Delay <= 0 {
		opts.Delay = DefaultSyncDelay
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Syncer{opts: opts, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), closing: make(chan struct{}), sessions: map[string]*syncState{}}
	s.resumeDeletions()
	for range opts.Workers {
		s.wg.Add(1)
		go s.work()
	}
	return s
}

// TurnEnded asks for session id's state after turn turnID: it returns at
// once (never blocks on the store).
func (s *Syncer) TurnEnded(id, turnID string) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	st := s.sessions[id]
	if st == nil {
		st = &syncState{ckpts: map[string]bool{}, snaps: map[string]bool{}}
		s.sessions[id] = st
	}
	if st.deleting {
		s.mu.Unlock()
		return
	}
	st.turnID = turnID
	if !st.dirty {
		st.dirty, st.since = true, time.Now()
	}
	s.mu.Unlock()
	s.signal()
}

// signal wakes a worker without blocking.
func (s *Syncer) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close takes no more turns and writes the sessions waiting to be
// written (not those waiting to be tried again) until ctx ends, then
// cancels what is under way and waits for the workers. What it could not
// write is written at the session's next turn's end, on this node or the
// one that resumes it.
func (s *Syncer) Close(ctx context.Context) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.closing)
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancel()
		<-done
	}
	s.cancel()
}

// isClosed reports whether Close was called.
func (s *Syncer) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Lag is how long ago the oldest turn not in the store yet ended (0 when
// every session is written), and the last error of a failing session.
func (s *Syncer) Lag() (time.Duration, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest time.Time
	last := ""
	for _, st := range s.sessions {
		if (st.dirty || st.running) && !st.since.IsZero() && (oldest.IsZero() || st.since.Before(oldest)) {
			oldest = st.since
		}
		if st.failures > 0 {
			last = st.lastErr
		}
	}
	if oldest.IsZero() {
		return 0, last
	}
	return time.Since(oldest), last
}

// work writes ready sessions until the Syncer closes.
func (s *Syncer) work() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		id, st, wait := s.next()
		if st != nil {
			s.run(id, st)
			continue
		}
		if s.isClosed() {
			// Nothing ready: a closing Syncer's worker is done.
			return
		}
		timer.Reset(wait)
		select {
		case <-s.ctx.Done():
			return
		case <-s.closing:
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// next takes a ready session (marked running), or says how long until
// one may be.
func (s *Syncer) next() (string, *syncState, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, wait := time.Now(), time.Hour
	var pick string
	var best *syncState
	for id, st := range s.sessions {
		if !st.dirty || st.running {
			continue
		}
		if d := st.retryAt.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		// A closing Syncer writes what waits at once; a deletion never
		// waits.
		if d := st.since.Add(s.opts.Delay).Sub(now); d > 0 && !s.closed && !st.deleting {
			wait = min(wait, d)
			continue
		}
		// The one waiting longest first.
		if best == nil || st.since.Before(best.since) {
			pick, best = id, st
		}
	}
	if best != nil {
		best.running, best.dirty = true, false
	}
	return pick, best, wait
}

// run writes one session and records the outcome.
func (s *Syncer) run(id string, st *syncState) {
	// st's walk caches and checkpoints are the running worker's alone.
	s.mu.Lock()
	turnID, deleting := st.turnID, st.deleting
	s.mu.Unlock()
	var err error
	if deleting {
		err = s.remove(id)
	} else {
		err = s.sync(id, turnID, st)
	}
	s.mu.Lock()
	st.running = false
	warn := ""
	if st.deleting {
		s.removedLocked(id, st, err)
	} else {
		warn = s.wroteLocked(id, st, err)
	}
	s.mu.Unlock()
	switch {
	case err == nil || s.ctx.Err() != nil || isGone(err):
	case deleting:
		s.opts.Logger.Warn("object store: a deleted session's objects not removed yet (retried)", "session", id, "err", err)
	default:
		s.opts.Logger.Warn("object store: session state not written", "session", id, "err", err)
	}
	if warn != "" && s.opts.Warn != nil {
		s.opts.Warn(id, "the session's state is not in the object store yet (retried in the background; the session goes on): "+warn)
	}
	s.signal()
}

// removedLocked records how a removal of session id went; a write it was
// deleted during leaves it waiting (dirty) to be removed.
func (s *Syncer) removedLocked(id string, st *syncState, err error) {
	switch {
	case st.dirty:
	case err == nil:
		delete(s.sessions, id)
	default:
		s.failLocked(st, err)
	}
}

// wroteLocked records how a write of session id went, and returns the
// failure to tell the session (once per run of failures).
func (s *Syncer) wroteLocked(id string, st *syncState, err error) string {
	switch {
	case err == nil:
		st.failures, st.warned, st.lastErr, st.retryAt = 0, false, "", time.Time{}
		st.synced = time.Now()
		if !st.dirty {
			st.since = time.Time{}
		}
		s.evictLocked()
	case isGone(err):
		delete(s.sessions, id)
	case s.ctx.Err() != nil:
		// Cut by Close: left to the session's next turn.
		st.dirty = true
	default:
		s.failLocked(st, err)
		if !st.warned {
			st.warned = true
			return st.lastErr
		}
	}
	return ""
}

// failLocked leaves st to be tried again after its backoff.
func (s *Syncer) failLocked(st *syncState, err error) {
	st.dirty = true
	st.failures++
	st.lastErr = berth.ErrorMessage(err)
	st.retryAt = time.Now().Add(s.backoff(st.failures))
}

// maxKept bounds the sessions the Syncer remembers (with their last
// walks, which spare unchanged files a read): past it, those written
// longest ago and not waiting are forgotten, and read whole at their next
// turn's end.
const maxKept = 256

// evictLocked forgets the sessions past maxKept, written longest ago
// first, never one waiting or being written.
func (s *Syncer) evictLocked() {
	for len(s.sessions) > maxKept {
		var oldest string
		var at time.Time
		for id, st := range s.sessions {
			if st.dirty || st.running || st.failures > 0 {
				continue
			}
			if oldest == "" || st.synced.Before(at) {
				oldest, at = id, st.synced
			}
		}
		if oldest == "" {
			return
		}
		delete(s.sessions, oldest)
	}
}

// backoff is the wait after n failures in a row.
func (s *Syncer) backoff(n int) time.Duration {
	d := s.opts.MinBackoff
	for i := 1; i < n && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.opts.MaxBackoff)
}

// errGone marks a session Resolve did not find.
type errGone struct{ error }

func (e errGone) Unwrap() error { return e.error }

// isGone reports whether err is Resolve's ENotFound.
func isGone(err error) bool {
	_, ok := err.(errGone)
	return ok
}

// sync writes the session's workspace and HOME and the checkpoints the
// store lacks, then its state.json (in one PUT, once every file it names
// is in the store) and records synced_seq; then the snapshots. At the
// session's first write here the state goes before the checkpoints, and
// again after them naming them.
func (s *Syncer) sync(id, turnID string, st *syncState) error {
	ctx := s.ctx
	t, err := s.opts.Resolve(ctx, id, turnID)
	if err != nil {
		if berth.IsCode(err, berth.ENotFound) {
			return errGone{err}
		}
		return err
	}
	u := s.opts.Uploader
	if !s.bucket.Load() {
		if err := u.Client().EnsureBucket(ctx); err != nil {
			return err
		}
		s.bucket.Store(true)
	}
	state := &State{V: StateVersion, SessionID: id, Seq: t.Seq, TurnID: t.TurnID}
	var local []*checkpoint.Checkpoint
	if s.opts.Checkpoints != nil {
		if local, err = s.localCheckpoints(ctx, id, st); err != nil {
			return err
		}
		state.Checkpoints = storedOf(local, st)
	}
	if !st.learned {
		// Written by an earlier daemon, or on the node it moved from:
		// its files are not packed again. Without it they are, at a cost.
		if err := u.Learn(ctx, id); err != nil {
			s.opts.Logger.Debug("object store: the session's stored state not learnt", "session", id, "err", err)
		} else {
			st.learned = true
		}
	}
	// No walk of this session yet: its first write here.
	first := st.prevWS == nil && st.prevHome == nil
	if err := s.walkTrees(ctx, t, st, state); err != nil {
		return err
	}
	// A first write here: what a move needs is in the store now, and the
	// state (synced_seq) does not wait for the checkpoints, whose first
	// write is one PUT a file. Later, a turn's checkpoint holds few new
	// blobs: it goes first, and the state is written once.
	if !first {
		if _, err := s.writeCheckpoints(ctx, id, local, st, state); err != nil {
			return err
		}
	}
	if err := s.putState(ctx, state); err != nil {
		return err
	}
	if first {
		wrote, err := s.writeCheckpoints(ctx, id, local, st, state)
		if err == nil && wrote {
			err = s.putState(ctx, state)
		}
		if err != nil {
			return err
		}
	}
	if s.opts.Snapshots != nil {
		return s.syncSnapshots(ctx, id, st)
	}
	return nil
}

// walkTrees writes the workspace and HOME of t into state, keeping the
// walks in st for the next write.
func (s *Syncer) walkTrees(ctx context.Context, t Target, st *syncState, state *State) error {
	u := s.opts.Uploader
	if t.Workspace != "" {
		tree, seen, err := u.Tree(ctx, t.Workspace, s.opts.Scan, t.Hide, st.prevWS)
		if err != nil {
			return err
		}
		state.Workspace, st.prevWS = tree, seen
	}
	if t.Home != "" {
		tree, seen, err := u.Tree(ctx, t.Home, s.opts.Scan, t.Hide, st.prevHome)
		if err != nil && !berth.IsCode(err, berth.ENotFound) {
			return err
		}
		state.Home, st.prevHome = tree, seen
	}
	return nil
}

// putState writes state as the session's state.json, then records it.
func (s *Syncer) putState(ctx context.Context, state *State) error {
	state.At = time.Now().UTC()
	if err := s.opts.Uploader.Client().putJSON(ctx, StateKey(state.SessionID), state); err != nil {
		return err
	}
	if s.opts.Synced != nil {
		return s.opts.Synced(ctx, state.SessionID, state.Seq, state.At)
	}
	return nil
}

// localCheckpoints lists the session's local checkpoints, having first
// learnt which the store has (once: written by an earlier daemon, they
// are not written again).
func (s *Syncer) localCheckpoints(ctx context.Context, id string, st *syncState) ([]*checkpoint.Checkpoint, error) {
	if !st.listed {
		err := s.opts.Uploader.Client().List(ctx, SessionKey(id)+"checkpoints/", func(key string, _ int64) error {
			if name, ok := cutCheckpointKey(key); ok {
				st.ckpts[name] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		st.listed = true
	}
	return s.opts.Checkpoints.List(id)
}

// storedOf is the ids of the checkpoints of local the store has.
func storedOf(local []*checkpoint.Checkpoint, st *syncState) []string {
	ids := make([]string, 0, len(local))
	for _, c := range local {
		if st.ckpts[c.ID] {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// writeCheckpoints writes the checkpoints of local the store does not
// have, names those it has in state, and says whether it wrote any.
func (s *Syncer) writeCheckpoints(ctx context.Context, id string, local []*checkpoint.Checkpoint, st *syncState, state *State) (bool, error) {
	wrote := false
	for _, c := range local {
		if st.ckpts[c.ID] {
			continue
		}
		put, err := s.opts.Uploader.Checkpoint(ctx, s.opts.Checkpoints, id, c.ID, st.ckPut)
		if err != nil {
			// The call took the last one over: the next is written whole.
			st.ckPut = nil
		}
		if berth.IsCode(err, berth.ENotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return wrote, err
		}
		st.ckpts[c.ID], st.ckPut, wrote = true, put, true
	}
	if wrote {
		state.Checkpoints = storedOf(local, st)
	}
	return wrote, nil
}

// cutCheckpointKey is the checkpoint id a key of the session's
// checkpoints/ names.
func cutCheckpointKey(key string) (string, bool) {
	return strings.CutSuffix(path.Base(key), ".json")
}

// syncSnapshots writes the session's local snapshots the store does not
// have: each archive, then its metadata (a snapshot is in the store once
// its .json is).
func (s *Syncer) syncSnapshots(ctx context.Context, id string, st *syncState) error {
	u := s.opts.Uploader
	if !st.snapsListed {
		err := u.Client().List(ctx, SessionKey(id)+"snapshots/", func(key string, _ int64) error {
			if name, ok := strings.CutSuffix(path.Base(key), ".json"); ok {
				st.snaps[name] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		st.snapsListed = true
	}
	local, err := s.opts.Snapshots.List(ctx, id)
	if err != nil {
		return err
	}
	for _, snap := range local {
		if st.snaps[snap.ID] {
			continue
		}
		err := u.Snapshot(ctx, s.opts.Snapshots, snap)
		if berth.IsCode(err, berth.ENotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		st.snaps[snap.ID] = true
	}
	return nil
}
