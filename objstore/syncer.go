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
	// wake is signalled when a session becomes ready.
	wake chan struct{}

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
	// prevWS and prevHome are the last walks' entries (unchanged files are
	// not read again); ckpts the checkpoints written.
	prevWS, prevHome map[string]checkpoint.Entry
	ckpts            map[string]bool
	listed           bool
}

// NewSyncer starts a Syncer's workers.
func NewSyncer(opts SyncerOptions) *Syncer {
	if opts.Workers <= 0 {
		opts.Workers = 2
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
	s := &Syncer{opts: opts, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), sessions: map[string]*syncState{}}
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
		st = &syncState{ckpts: map[string]bool{}}
		s.sessions[id] = st
	}
	st.turnID = turnID
	if !st.dirty {
		st.dirty, st.since = true, time.Now()
	}
	s.mu.Unlock()
	s.signal()
}

// Forget drops session id (deleted): nothing more is written of it.
func (s *Syncer) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.sessions[id]; st != nil && !st.running {
		delete(s.sessions, id)
	} else if st != nil {
		st.dirty = false
	}
}

// signal wakes a worker without blocking.
func (s *Syncer) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops the workers and waits for them; a write under way is
// cancelled (the next node or start writes it again).
func (s *Syncer) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
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
		timer.Reset(wait)
		select {
		case <-s.ctx.Done():
			return
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
	turnID := st.turnID
	s.mu.Unlock()
	err := s.sync(id, turnID, st)
	s.mu.Lock()
	st.running = false
	warn := ""
	switch {
	case err == nil:
		st.failures, st.warned, st.lastErr, st.retryAt = 0, false, "", time.Time{}
		if !st.dirty {
			st.since = time.Time{}
		}
	case berth.IsCode(err, berth.ENotFound) && s.ctx.Err() == nil && isGone(err):
		delete(s.sessions, id)
	case s.ctx.Err() != nil:
	default:
		st.dirty = true
		st.failures++
		st.lastErr = berth.ErrorMessage(err)
		st.retryAt = time.Now().Add(s.backoff(st.failures))
		if !st.warned {
			st.warned, warn = true, st.lastErr
		}
	}
	s.mu.Unlock()
	if err != nil && s.ctx.Err() == nil {
		s.opts.Logger.Warn("object store: session state not written", "session", id, "err", err)
	}
	if warn != "" && s.opts.Warn != nil {
		s.opts.Warn(id, "the session's state is not in the object store yet (retried in the background; the session goes on): "+warn)
	}
	s.signal()
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

// sync writes the session's checkpoints, workspace and HOME, then its
// state.json (last, in one PUT), then records synced_seq.
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
	if s.opts.Checkpoints != nil {
		if state.Checkpoints, err = s.syncCheckpoints(ctx, id, st); err != nil {
			return err
		}
	}
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
	state.At = time.Now().UTC()
	if err := u.Client().putJSON(ctx, StateKey(id), state); err != nil {
		return err
	}
	if s.opts.Synced != nil {
		return s.opts.Synced(ctx, id, state.Seq, state.At)
	}
	return nil
}

// syncCheckpoints writes the session's local checkpoints the store does
// not have, and returns the ids of all it has.
func (s *Syncer) syncCheckpoints(ctx context.Context, id string, st *syncState) ([]string, error) {
	u := s.opts.Uploader
	if !st.listed {
		// Written by an earlier daemon: not again.
		err := u.Client().List(ctx, SessionKey(id)+"checkpoints/", func(key string, _ int64) error {
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
	local, err := s.opts.Checkpoints.List(id)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(local))
	for _, c := range local {
		if !st.ckpts[c.ID] {
			err := u.Checkpoint(ctx, s.opts.Checkpoints, id, c.ID)
			if berth.IsCode(err, berth.ENotFound) {
				continue // pruned meanwhile
			}
			if err != nil {
				return nil, err
			}
			st.ckpts[c.ID] = true
		}
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// cutCheckpointKey is the checkpoint id a key of the session's
// checkpoints/ names.
func cutCheckpointKey(key string) (string, bool) {
	return strings.CutSuffix(path.Base(key), ".json")
}
