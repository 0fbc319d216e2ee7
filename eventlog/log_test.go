package eventlog

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"golang.org/x/sync/errgroup"
)

func TestSeqContiguousUnderConcurrency(t *testing.T) {
	sessions := ids(8)
	store := newStore(t, sessions...)
	l := openLog(t, store, Options{MaxBatch: 256})
	const producers = 32
	perProducer := scale(2000)

	// Every producer spreads its events over all sessions; each event
	// says who made it and in which order.
	var g errgroup.Group
	for p := range producers {
		g.Go(func() error {
			for i := range perProducer {
				e := ev(sessions[(p+i)%len(sessions)], berth.EventAgentMessage, p, i)
				var err error
				if i%50 == 0 {
					_, err = l.AppendSync(testCtx(t), e)
				} else {
					err = l.Append(testCtx(t), e)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	total := 0
	for _, id := range sessions {
		evs := stored(t, store, id)
		contiguous(t, evs)
		total += len(evs)
		if got := l.LastSeq(id); got != int64(len(evs)) {
			t.Fatalf("%s: LastSeq %d, store has %d", id, got, len(evs))
		}
		// Per producer, a session's events keep the order of enqueue.
		lastI := map[int]int{}
		for _, e := range evs {
			p, i := payload(t, e)
			if prev, ok := lastI[p]; ok && i <= prev {
				t.Fatalf("%s: producer %d's event %d after its event %d", id, p, i, prev)
			}
			lastI[p] = i
		}
	}
	if total != producers*perProducer {
		t.Fatalf("stored %d events, appended %d", total, producers*perProducer)
	}
}

func TestAppendSyncReturnsSeqs(t *testing.T) {
	store := newStore(t, "a", "b")
	l := openLog(t, store, Options{})
	got, err := l.AppendSync(testCtx(t), msg("a", 1), msg("b", 1), msg("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 1, 2}
	for i, e := range got {
		if e.Seq != want[i] {
			t.Fatalf("event %d: seq %d, want %d", i, e.Seq, want[i])
		}
	}
	got, err = l.AppendSync(testCtx(t), msg("a", 3))
	if err != nil || got[0].Seq != 3 {
		t.Fatalf("next append: %+v, %v", got, err)
	}
	if l.LastSeq("a") != 3 || l.LastSeq("b") != 1 || l.LastSeq("nope") != 0 {
		t.Fatalf("LastSeq: a=%d b=%d nope=%d", l.LastSeq("a"), l.LastSeq("b"), l.LastSeq("nope"))
	}
	// The caller's events are not modified, and producer seqs are ignored.
	mine := msg("a", 4)
	mine.Seq = 99
	got, err = l.AppendSync(testCtx(t), mine)
	if err != nil || got[0].Seq != 4 || mine.Seq != 99 {
		t.Fatalf("producer seq: got %d (%v), caller's copy %d", got[0].Seq, err, mine.Seq)
	}
	// Nothing to append is not an error.
	if evs, err := l.AppendSync(testCtx(t)); err != nil || evs != nil {
		t.Fatalf("empty AppendSync: %v, %v", evs, err)
	}
}

func TestAppendValidation(t *testing.T) {
	store := newStore(t, "a")
	l := New(store, Options{Logger: quiet})
	wantCode(t, l.Append(testCtx(t), msg("a", 1)), berth.EUnavailable) // not open yet
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, l.Open(), berth.EConflict)
	for _, bad := range []berth.Event{
		{SessionID: "", Type: berth.EventAgentMessage},
		{SessionID: "a", Type: ""},
		{SessionID: "a", Type: berth.EventAgentMessage, Data: []byte(`{"unterminated":`)},
	} {
		wantCode(t, l.Append(testCtx(t), msg("a", 1), bad), berth.EInvalid)
	}
	// An event with no time gets one.
	got, err := l.AppendSync(testCtx(t), berth.Event{SessionID: "a", Type: berth.EventPlan})
	if err != nil || got[0].Time.IsZero() || got[0].Seq != 1 {
		t.Fatalf("event without time: %+v, %v", got, err)
	}
	if err := l.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, l.Open(), berth.EUnavailable)
}

func TestUnknownSessionFailsAlone(t *testing.T) {
	store := newStore(t, "a")
	l := openLog(t, store, Options{})
	_, err := l.AppendSync(testCtx(t), msg("ghost", 1))
	wantCode(t, err, berth.ENotFound)
	if l.lookup("ghost") != nil {
		t.Fatal("a hub was kept for a session that does not exist")
	}
	evs, err := l.AppendSync(testCtx(t), msg("a", 1))
	if err != nil || evs[0].Seq != 1 {
		t.Fatalf("append after a rejected one: %+v, %v", evs, err)
	}
	// Flush reports the failed asynchronous append.
	if err := l.Append(testCtx(t), msg("ghost", 2)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, l.Flush(testCtx(t)), berth.ENotFound)
	if err := l.Flush(testCtx(t)); err != nil {
		t.Fatalf("a later flush still fails: %v", err)
	}
}

func TestBatchIsolation(t *testing.T) {
	// A session deleted behind the log's back makes the store reject the
	// whole batch; the other requests of that batch must still commit.
	base := newStore(t, "a", "b", "doomed")
	store := newHookStore(base)
	l := openLog(t, store, Options{})
	if _, err := l.AppendSync(testCtx(t), msg("doomed", 0)); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	store.before = g.hook // ordered before the writer's next read by the enqueue below
	if err := l.Append(testCtx(t), msg("a", 0)); err != nil {
		t.Fatal(err)
	}
	<-g.entered // the first batch is in flight; the next requests queue up
	var wg sync.WaitGroup
	results := make([]error, 2)
	queued := func() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.queue) }
	before := queued()
	for i, id := range []string{"doomed", "b"} {
		wg.Go(func() { _, results[i] = l.AppendSync(testCtx(t), msg(id, 1)) })
		// Keep the enqueue order: the next starts once this one is queued.
		poll(t, "the append to be queued", func() bool { return queued() > before+i })
	}
	if err := base.DeleteSession(testCtx(t), "doomed"); err != nil {
		t.Fatal(err)
	}
	g.release()
	wg.Wait()
	wantCode(t, results[0], berth.ENotFound)
	if results[1] != nil {
		t.Fatalf("the innocent request failed: %v", results[1])
	}
	if sizes := store.batchSizes(); len(sizes) != 3 || sizes[2] != 1 {
		t.Fatalf("committed batches %v, want the retried request alone last", sizes)
	}
	for _, id := range []string{"a", "b"} {
		evs := stored(t, base, id)
		contiguous(t, evs)
		if len(evs) != 1 {
			t.Fatalf("%s: %d events stored", id, len(evs))
		}
	}
}

func TestLeaseLostFailsOnlyItsSessions(t *testing.T) {
	// A cluster node fenced out of one session (the store fails the whole
	// batch with ELeaseLost naming it) must still commit the other
	// sessions' events of that batch, together, and keep committing them.
	base := newStore(t, "a", "b", "c", "lost")
	store := newHookStore(base)
	l := openLog(t, store, Options{})
	g := newGate()
	var fenced sync.Map // session id → true
	store.before = func(evs []berth.Event) error {
		if err := g.hook(evs); err != nil {
			return err
		}
		var out []string
		for _, e := range evs {
			if _, ok := fenced.Load(e.SessionID); ok && !slices.Contains(out, e.SessionID) {
				out = append(out, e.SessionID)
			}
		}
		if len(out) > 0 {
			return &berth.Error{Code: berth.ELeaseLost, Message: "fenced out", Details: map[string]any{"sessions": out}}
		}
		return nil
	}
	if err := l.Append(testCtx(t), msg("a", 0)); err != nil {
		t.Fatal(err)
	}
	<-g.entered // the first batch is in flight; the next requests queue up
	fenced.Store("lost", true)
	var wg sync.WaitGroup
	results := make([]error, 3)
	queued := func() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.queue) }
	before := queued()
	for i, id := range []string{"b", "lost", "c"} {
		wg.Go(func() { _, results[i] = l.AppendSync(testCtx(t), msg(id, 1)) })
		poll(t, "the append to be queued", func() bool { return queued() > before+i })
	}
	g.release()
	wg.Wait()
	wantCode(t, results[1], berth.ELeaseLost)
	if results[0] != nil || results[2] != nil {
		t.Fatalf("the other sessions' appends failed: %v, %v", results[0], results[2])
	}
	// b and c went in together, not one by one.
	if sizes := store.batchSizes(); len(sizes) != 2 || sizes[1] != 2 {
		t.Fatalf("committed batches %v, want [1 2]", sizes)
	}
	if n := len(stored(t, base, "lost")); n != 0 {
		t.Fatalf("the fenced session has %d events", n)
	}
	// The log goes on for the others.
	for _, id := range []string{"a", "b", "c"} {
		if _, err := l.AppendSync(testCtx(t), msg(id, 2)); err != nil {
			t.Fatalf("%s after the lease loss: %v", id, err)
		}
		evs := stored(t, base, id)
		contiguous(t, evs)
	}
}

func TestCommitFailureLeavesNoGap(t *testing.T) {
	base := newStore(t, "a")
	store := newHookStore(base)
	var fail sync.Mutex
	failing := false
	store.before = func([]berth.Event) error {
		fail.Lock()
		defer fail.Unlock()
		if failing {
			return errors.New("disk on fire")
		}
		return nil
	}
	setFailing := func(v bool) { fail.Lock(); failing = v; fail.Unlock() }
	l := openLog(t, store, Options{})
	if _, err := l.AppendSync(testCtx(t), msg("a", 1), msg("a", 2)); err != nil {
		t.Fatal(err)
	}
	setFailing(true)
	_, err := l.AppendSync(testCtx(t), msg("a", 3))
	wantCode(t, err, berth.EInternal)
	if err := l.Append(testCtx(t), msg("a", 4)); err != nil {
		t.Fatal(err)
	}
	wantCode(t, l.Flush(testCtx(t)), berth.EInternal)
	setFailing(false)
	loads := store.lastSeqCalls()
	got, err := l.AppendSync(testCtx(t), msg("a", 5))
	if err != nil || got[0].Seq != 3 {
		t.Fatalf("after failures: %+v, %v; want seq 3", got, err)
	}
	// The failure made the log reload the session's seq from the store.
	if store.lastSeqCalls() == loads {
		t.Fatal("the seq was not reloaded from the store after a failed commit")
	}
	contiguous(t, stored(t, base, "a"))
}

func TestBackPressure(t *testing.T) {
	store, g := gatedStore(t, "a")
	const queue = 8
	l := openLog(t, store, Options{QueueSize: queue, MaxBatch: 4})

	// Fill the budget: the writer holds the first batch at the gate.
	appendN(t, l, "a", queue)
	<-g.entered
	// Producers now block instead of queueing more.
	var wg sync.WaitGroup
	var unblocked sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		unblocked.Add(1)
		go func() {
			defer wg.Done()
			defer unblocked.Done()
			for i := range 5 {
				if err := l.Append(testCtx(t), ev("a", berth.EventAgentMessage, p+1, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Every producer has tried: all wait for room, or (the defect) more
	// than the queue is held.
	poll(t, "the producers to block", func() bool {
		l.budget.mu.Lock()
		waiting := l.budget.waiters.Len()
		l.budget.mu.Unlock()
		return waiting == 4 || l.budget.inUse() > queue
	})
	if used := l.budget.inUse(); used > queue {
		t.Fatalf("%d events held with a queue of %d", used, queue)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Append(ctx, msg("a", 100)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append on a full queue: %v, want deadline exceeded", err)
	}
	// An append bigger than the whole queue still goes through, alone.
	big := make([]berth.Event, 3*queue)
	for i := range big {
		big[i] = msg("a", 1000+i)
	}
	bigDone := make(chan error, 1)
	go func() { _, err := l.AppendSync(testCtx(t), big...); bigDone <- err }()

	g.release()
	unblocked.Wait()
	if err := <-bigDone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := l.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	evs := stored(t, store.Store, "a")
	contiguous(t, evs)
	if len(evs) != queue+4*5+len(big) {
		t.Fatalf("stored %d events", len(evs))
	}
	// The writer gives the room back just after it settles the batch that
	// held the flush, so wait for it briefly.
	for deadline := time.Now().Add(5 * time.Second); l.budget.inUse() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d events still held after flush", l.budget.inUse())
		}
		time.Sleep(time.Millisecond)
	}
	for _, n := range store.batchSizes() {
		if n > 4 && n != len(big) {
			t.Fatalf("a batch of %d events with MaxBatch 4", n)
		}
	}
}

func TestGroupCommit(t *testing.T) {
	store, g := gatedStore(t, ids(4)...)
	l := openLog(t, store, Options{})
	if err := l.Append(testCtx(t), msg("s00", 0)); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	// While the first transaction is held, 400 appends from 4 sessions pile up.
	for i := range 400 {
		if err := l.Append(testCtx(t), msg(ids(4)[i%4], i)); err != nil {
			t.Fatal(err)
		}
	}
	g.release()
	if err := l.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if sizes := store.batchSizes(); len(sizes) != 2 || sizes[1] != 400 {
		t.Fatalf("batches %v, want [1 400]", sizes)
	}
}

func TestCloseDrains(t *testing.T) {
	store, g := gatedStore(t, "a")
	l := startLog(t, store, Options{MaxBatch: 10})
	appendN(t, l, "a", 100)
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- l.Close(testCtx(t)) }()
	// Close waits for the queue; a Close that times out says so.
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close with a blocked store: %v", err)
	}
	wantCode(t, l.Append(testCtx(t), msg("a", 1000)), berth.EUnavailable)
	wantCode(t, l.Flush(testCtx(t)), berth.EUnavailable)
	g.release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := l.Close(testCtx(t)); err != nil {
		t.Fatalf("second close: %v", err)
	}
	evs := stored(t, store.Store, "a")
	contiguous(t, evs)
	if len(evs) != 100 {
		t.Fatalf("close drained %d of 100 events", len(evs))
	}
	// Never opened: Close is immediate.
	if err := New(store, Options{}).Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
}

func TestRestartContinuesSeq(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	createSessions(t, store, "a")
	l := startLog(t, store, Options{})
	appendN(t, l, "a", 10)
	if err := l.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	store.Close()

	store = openStore(t, dir)
	l = openLog(t, store, Options{})
	if l.LastSeq("a") != 0 {
		t.Fatal("a new log knows seqs before touching the store")
	}
	got, err := l.AppendSync(testCtx(t), msg("a", 10))
	if err != nil || got[0].Seq != 11 {
		t.Fatalf("after restart: %+v, %v; want seq 11", got, err)
	}
	contiguous(t, stored(t, store, "a"))
}

func TestForget(t *testing.T) {
	store := newStore(t, "a")
	l := openLog(t, store, Options{})
	if _, err := l.AppendSync(testCtx(t), msg("a", 1)); err != nil {
		t.Fatal(err)
	}
	st, err := l.Stream(testCtx(t), "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := store.DeleteSession(testCtx(t), "a"); err != nil {
		t.Fatal(err)
	}
	l.Forget("a")
	_, err = st.Next(testCtx(t))
	wantCode(t, err, berth.ENotFound)
	if l.LastSeq("a") != 0 {
		t.Fatal("LastSeq of a forgotten session")
	}
	// The same id, created again, starts over at 1.
	createSessions(t, store, "a")
	got, err := l.AppendSync(testCtx(t), msg("a", 1))
	if err != nil || got[0].Seq != 1 {
		t.Fatalf("recreated session: %+v, %v", got, err)
	}
}

// A commit failure of an Append that settled before the next Flush was
// called is still reported by that Flush, once.
func TestFlushReportsAnEarlierFailedAppend(t *testing.T) {
	store := newHookStore(newStore(t, "a"))
	store.before = func([]berth.Event) error { return errors.New("disk full") }
	l := openLog(t, store, Options{})
	if err := l.Append(testCtx(t), msg("a", 1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		failed := l.failures > 0
		l.mu.Unlock()
		if failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the append never failed")
		}
		time.Sleep(time.Millisecond)
	}
	if err := l.Flush(testCtx(t)); err == nil {
		t.Fatal("Flush returned nil although an Append before it failed to commit")
	}
	store.before = nil
	if err := l.Flush(testCtx(t)); err != nil {
		t.Fatalf("a second Flush reported the same failure again: %v", err)
	}
}

// poll waits until cond holds, failing the test after a generous deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
