// Package eventlog is the write path and the live read path of every
// session's append-only event log.
//
// Producers Append events; one writer goroutine takes everything queued
// (up to MaxBatch events), gives each event the next seq of its session,
// writes the whole batch in one store transaction and only then publishes
// it to readers. While one transaction commits the next batch accumulates,
// so the write rate adapts to the load without any timer (group commit).
//
// Readers Stream a session from any position: recent events come from a
// per-session ring in memory, older ones from the store, so a slow reader
// catches up from disk and never holds back the writer or other readers.
//
// The log assumes it is the only writer of a session while it writes it; in
// a cluster another node may write the session before or after, and
// Notify, Wake and Release (remote.go) keep the streams of this node true
// to the store.
package eventlog

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/optx"
)

// Defaults of Options.
const (
	DefaultMaxBatch  = 2048
	DefaultQueueSize = 16384
	DefaultRingSize  = 1024
	DefaultRingBytes = 4 << 20
)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	// MaxBatch bounds the events written in one store transaction.
	MaxBatch int
	// QueueSize bounds the events enqueued but not yet committed; Append
	// blocks while it is reached (back-pressure). Blocked producers are
	// admitted in arrival order; one Append larger than QueueSize is
	// admitted alone, once everything before it is committed.
	QueueSize int
	// RingSize is how many recent events each session keeps in memory
	// for live readers.
	RingSize int
	// RingBytes bounds the data of the recent events each session keeps
	// in memory; a committed event past it is let go (readers get it from
	// the store).
	RingBytes int
	// SessionBytes bounds, per session, the bytes of event data enqueued
	// and not yet committed: an Append of a session past it waits
	// (back-pressure on that session alone), so one session that floods
	// the log holds at most this much of the daemon's memory in it. An
	// event larger than the whole bound is admitted alone, once nothing
	// else of its session is in flight. 0 leaves sessions unbounded.
	SessionBytes int
	// Logger receives commit failures. nil discards them.
	Logger *slog.Logger
	// Observer is told of every committed batch (metrics); nil tells no
	// one.
	Observer Observer
}

// Observer is told of the writer's commits, on the writer goroutine: it
// must return at once and never call the Log.
type Observer interface {
	// Committed: one store transaction wrote events (of any number of
	// sessions) in took.
	Committed(events int, took time.Duration)
}

// noObserver is the Observer of a Log given none.
type noObserver struct{}

func (noObserver) Committed(int, time.Duration) {}

// Log sequences, persists and publishes the events of every session. Its
// methods are safe for concurrent use.
type Log struct {
	store     berth.EventStore
	maxBatch  int
	ringSize  int
	ringBytes int
	sessBytes int
	logger    *slog.Logger
	observer  Observer
	budget    *budget
	wake      chan struct{} // capacity 1: "the queue is not empty"
	done      chan struct{} // closed when the writer goroutine has ended
	doneOnce  sync.Once
	writerBuf writerState // owned by the writer goroutine

	mu       sync.Mutex
	state    logState
	queue    []*request // requests not yet taken by the writer, from head on
	head     int
	failures int64 // requests that failed to commit, ever
	// unreported counts failed Appends (nobody waited for them) that no
	// Flush has reported yet.
	unreported int64
	lastErr    error // the error of the latest failure
	// unreportedOf is unreported per session, for FlushSession: a session
	// is told only of its own failures. A session that does not exist
	// (deleted) has no entry: nobody can be owed its failures.
	unreportedOf map[string]*sessionFailures

	hubsMu sync.Mutex
	hubs   map[string]*hub

	// onCommit, when set, is told the sessions of every committed batch.
	onCommit atomic.Pointer[func(sessionID string)]
	// onRefused, when set, is told the sessions of every failed Append.
	onRefused atomic.Pointer[func(sessionID string, err error)]
}

// OnRefused makes fn be called, on the writer goroutine, for each session
// of an Append the store refused, with the store's error (a cluster node
// learns this way that another node holds a session's lease: ELeaseLost).
// fn must return at once and never call the Log. nil removes it.
func (l *Log) OnRefused(fn func(sessionID string, err error)) {
	if fn == nil {
		l.onRefused.Store(nil)
		return
	}
	l.onRefused.Store(&fn)
}

// OnCommit makes fn be called, on the writer goroutine, once per session
// per committed batch, after its events are visible to readers. fn must
// return quickly and never call the Log. nil removes it.
func (l *Log) OnCommit(fn func(sessionID string)) {
	if fn == nil {
		l.onCommit.Store(nil)
		return
	}
	l.onCommit.Store(&fn)
}

// logState is where a Log is in its life.
type logState int

// The states of a Log: created → open → closing; created → closing.
const (
	stateCreated logState = iota
	stateOpen
	stateClosing
)

// request is one Append, AppendSync or Flush waiting for the writer.
type request struct {
	events []berth.Event // the log's own copies; the writer sets Seq
	// done receives the outcome when the request is synchronous
	// (capacity 1, so the writer never blocks on it); nil for Append.
	done chan error
	// flush marks a Flush; session, when set, a FlushSession of it;
	// quiet a Settled, which reports nothing.
	flush   bool
	session string
	quiet   bool
	// err is set by the writer when the request fails.
	err error
	// holds are the session bytes the request holds until it is settled.
	holds []hold
}

// hold is n units of one session's byte budget.
type hold struct {
	b *budget
	n int
}

// New returns a Log over store. Call Open to start it.
func New(store berth.EventStore, opts Options) *Log {
	optx.Default(&opts.MaxBatch, DefaultMaxBatch)
	optx.Default(&opts.QueueSize, DefaultQueueSize)
	optx.Default(&opts.RingSize, DefaultRingSize)
	optx.Default(&opts.RingBytes, DefaultRingBytes)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = noObserver{}
	}
	return &Log{
		observer:  opts.Observer,
		store:     store,
		maxBatch:  opts.MaxBatch,
		ringSize:  opts.RingSize,
		ringBytes: opts.RingBytes,
		sessBytes: opts.SessionBytes,
		logger:    opts.Logger,
		budget:    newBudget(opts.QueueSize),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		hubs:      make(map[string]*hub),
	}
}

// Open starts the writer goroutine. EConflict if the log was opened
// before, EUnavailable if it was closed.
func (l *Log) Open() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case stateOpen:
		return berth.Errorf(berth.EConflict, "event log is already open")
	case stateClosing:
		return errClosed
	}
	l.state = stateOpen
	go l.run()
	return nil
}

// Close stops accepting events, waits until everything already queued is
// committed and published, and stops the writer. When ctx ends first it
// returns ctx.Err() and the writer goes on draining; Close may be called
// again to wait for it. Streams return EUnavailable once they have caught
// up with a closed log.
func (l *Log) Close(ctx context.Context) error {
	l.mu.Lock()
	started := l.state != stateCreated
	l.state = stateClosing
	l.mu.Unlock()
	l.budget.close() // fail producers blocked on back-pressure
	l.hubsMu.Lock()
	for _, h := range l.hubs {
		if h.bytes != nil {
			h.bytes.close()
		}
	}
	l.hubsMu.Unlock()
	if !started {
		l.doneOnce.Do(func() { close(l.done) })
		return nil
	}
	l.signal()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Append enqueues events and returns without waiting for their commit. It
// blocks only while the queue is full (back-pressure), until ctx ends. The
// events of a session get seqs in the order they were enqueued. Their Seq
// is ignored; a zero Time becomes now. EInvalid for an event without
// session or type or whose data is not JSON, EUnavailable when the log is
// not open. A commit failure after Append returned is logged and reported
// by the next Flush.
func (l *Log) Append(ctx context.Context, evs ...berth.Event) error {
	_, err := l.enqueue(ctx, evs, false)
	return err
}

// AppendSync enqueues events like Append, waits until they are committed
// and published, and returns them with Seq set. When ctx ends first it
// returns ctx.Err(), and the events may still be committed.
func (l *Log) AppendSync(ctx context.Context, evs ...berth.Event) ([]berth.Event, error) {
	req, err := l.enqueue(ctx, evs, true)
	if err != nil || req == nil {
		return nil, err
	}
	select {
	case err := <-req.done:
		if err != nil {
			return nil, err
		}
		return req.events, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Flush waits until every event enqueued before the call is committed and
// published. It returns an error carrying the code of the latest failure
// when an Append (whose caller did not wait) failed to commit since the
// previous Flush that reported one; each such failure is reported once.
// It reports every session's failures (those a FlushSession reported
// excepted): a caller that speaks for one session uses FlushSession.
func (l *Log) Flush(ctx context.Context) error { return l.flush(ctx, "") }

// FlushSession is Flush for one session's caller: it waits for the same
// (every event enqueued before the call, of any session) but reports only
// the failed Appends of that session, each once. One session's failure (a
// deleted session's events: not_found) never reaches another's caller.
func (l *Log) FlushSession(ctx context.Context, sessionID string) error {
	return l.flush(ctx, sessionID)
}

// Settled waits, as Flush does, until every event enqueued before the
// call is committed (or failed), but reports nothing: a failure stays for
// the Flush of the caller that appended it.
func (l *Log) Settled(ctx context.Context) error { return l.wait(ctx, "", true) }

// flush queues a Flush (of sessionID's failures when set) and waits for it.
func (l *Log) flush(ctx context.Context, sessionID string) error {
	return l.wait(ctx, sessionID, false)
}

// wait queues a flush request and waits for the writer to settle it.
func (l *Log) wait(ctx context.Context, sessionID string, quiet bool) error {
	req := &request{flush: true, session: sessionID, quiet: quiet, done: make(chan error, 1)}
	l.mu.Lock()
	if l.state != stateOpen {
		l.mu.Unlock()
		return errNotOpen(l)
	}
	l.push(req)
	l.mu.Unlock()
	l.signal()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// enqueue validates and copies evs, waits for room and queues them.
// It returns nil and no error for an empty call.
func (l *Log) enqueue(ctx context.Context, evs []berth.Event, wait bool) (*request, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	now := time.Now().UTC()
	own := slices.Clone(evs)
	for i := range own {
		e := &own[i]
		if e.SessionID == "" || e.Type == "" {
			return nil, berth.Errorf(berth.EInvalid, "event %d: session id and type are required", i)
		}
		if e.Data != nil && !json.Valid(e.Data) {
			return nil, berth.Errorf(berth.EInvalid, "event %d: data is not valid JSON", i)
		}
		e.Seq = 0
		if e.Time.IsZero() {
			e.Time = now
		}
	}
	req := &request{events: own}
	if wait {
		req.done = make(chan error, 1)
	}
	if err := l.holdBytes(ctx, req); err != nil {
		return nil, err
	}
	if err := l.budget.acquire(ctx, len(own)); err != nil {
		req.releaseBytes()
		return nil, err
	}
	l.mu.Lock()
	if l.state != stateOpen {
		l.mu.Unlock()
		l.budget.release(len(own))
		req.releaseBytes()
		return nil, errNotOpen(l)
	}
	l.push(req)
	l.mu.Unlock()
	l.signal()
	return req, nil
}

// push appends req to the queue. l.mu is held.
func (l *Log) push(req *request) { l.queue = append(l.queue, req) }

// signal wakes the writer. It never blocks.
func (l *Log) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// errNotOpen is the error of a call on a log that is not open. l.mu is held.
func errNotOpen(l *Log) error {
	if l.state == stateCreated {
		return berth.Errorf(berth.EUnavailable, "event log is not open")
	}
	return errClosed
}

// LastSeq returns the highest committed seq of a session that the log
// knows in memory, 0 if it knows none (the store knows better then).
func (l *Log) LastSeq(sessionID string) int64 {
	h := l.lookup(sessionID)
	if h == nil {
		return 0
	}
	last, ok := h.committed()
	if !ok {
		return 0
	}
	return last
}

// Forget drops what the log keeps in memory about a session, once it is
// deleted. Streams of that session end with ENotFound. Events of it still
// queued fail with ENotFound when the writer reaches them.
func (l *Log) Forget(sessionID string) {
	l.hubsMu.Lock()
	h := l.hubs[sessionID]
	delete(l.hubs, sessionID)
	l.hubsMu.Unlock()
	l.mu.Lock()
	delete(l.unreportedOf, sessionID)
	l.mu.Unlock()
	if h != nil {
		h.forget()
	}
}

// hubFor returns the hub of a session, creating it if needed.
func (l *Log) hubFor(sessionID string) *hub {
	l.hubsMu.Lock()
	defer l.hubsMu.Unlock()
	h := l.hubs[sessionID]
	if h == nil {
		h = newHub(l.ringSize, l.ringBytes, l.sessBytes)
		l.hubs[sessionID] = h
	}
	return h
}

// lookup returns the hub of a session, or nil.
func (l *Log) lookup(sessionID string) *hub {
	l.hubsMu.Lock()
	defer l.hubsMu.Unlock()
	return l.hubs[sessionID]
}
