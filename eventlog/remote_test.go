package eventlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// The tests below stand two daemons of a cluster on one store: log "here"
// streams a session, log "there" (another node) writes it, and only
// notices (what PostgreSQL NOTIFY delivers) tell "here" about it.

// collect reads st until it has every event up to seq want, failing on a
// gap, a duplicate or a stall of more than a few seconds.
func collect(t *testing.T, st berth.EventStream, from, want int64) {
	t.Helper()
	if err := follow(testCtx(t), st, from, want); err != nil {
		t.Fatal(err)
	}
}

// follow is collect for any goroutine: it returns what went wrong.
func follow(ctx context.Context, st berth.EventStream, from, want int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	next := from
	for next <= want {
		evs, err := st.Next(ctx)
		if err != nil {
			return fmt.Errorf("waiting for seq %d (of %d): %w", next, want, err)
		}
		for _, e := range evs {
			if e.Seq != next {
				return fmt.Errorf("got seq %d, want %d", e.Seq, next)
			}
			next++
		}
	}
	return nil
}

// nextIn calls st.Next in a goroutine and returns its outcome's channel, so
// a test can check that nothing arrives before the notice.
type outcome struct {
	evs []berth.Event
	err error
}

func nextIn(ctx context.Context, st berth.EventStream) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		evs, err := st.Next(ctx)
		ch <- outcome{evs, err}
	}()
	return ch
}

// emptyReads wraps a store and signals every ListEvents that found nothing:
// a stream that read nothing is about to wait for a wake-up.
type emptyReads struct {
	berth.Store
	empty chan struct{}
}

// ListEvents implements berth.Store.
func (s *emptyReads) ListEvents(ctx context.Context, id string, f berth.EventFilter) ([]berth.Event, error) {
	evs, err := s.Store.ListEvents(ctx, id, f)
	if err == nil && len(evs) == 0 {
		select {
		case s.empty <- struct{}{}:
		default:
		}
	}
	return evs, err
}

func TestNotifyCarriesAnotherNodesEventsWithNoGapOrDuplicate(t *testing.T) {
	store := newStore(t, "s1")
	reads := &emptyReads{Store: store, empty: make(chan struct{}, 1)}
	here := openLog(t, reads, Options{})
	there := openLog(t, store, Options{})
	st, err := here.Stream(testCtx(t), "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The reader runs on its own, as an SSE client would.
	done := make(chan struct{})
	var readErr error
	go func() {
		defer close(done)
		if readErr = follow(testCtx(t), st, 1, 51); readErr == nil {
			if _, err := st.Next(testCtx(t)); !errors.Is(err, io.EOF) {
				readErr = fmt.Errorf("after session_stopped: %v, want EOF", err)
			}
		}
	}()
	for batch := range 20 {
		// Written only once the reader waits, so only a notice can wake it.
		select {
		case <-reads.empty:
		case <-done:
			t.Fatalf("the reader ended early: %v", readErr)
		}
		var evs []berth.Event
		for i := range 1 + batch%4 {
			evs = append(evs, msg("s1", i))
		}
		if batch == 19 {
			evs = append(evs, berth.NewEvent("s1", "", berth.EventSessionStopped, map[string]string{"reason": "node_lost"}))
		}
		got, err := there.AppendSync(testCtx(t), evs...)
		if err != nil {
			t.Fatal(err)
		}
		// Notices may repeat and come out of step with the reads: only the
		// store decides what a stream returns.
		here.Notify("s1", got[len(got)-1].Seq)
		if batch%3 == 0 {
			here.Notify("s1", got[0].Seq)
		}
	}
	<-done
	if readErr != nil {
		t.Fatal(readErr)
	}
}

func TestWakeAllWakesEveryStream(t *testing.T) {
	store := newStore(t, "s1", "s2")
	reads := &emptyReads{Store: store, empty: make(chan struct{}, 2)}
	here := openLog(t, reads, Options{})
	there := openLog(t, store, Options{})
	var chs []<-chan outcome
	for _, id := range []string{"s1", "s2"} {
		st, err := here.Stream(testCtx(t), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		chs = append(chs, nextIn(testCtx(t), st))
		// Written only once the reader waits, so only a wake-up wakes it.
		<-reads.empty
		if _, err := there.AppendSync(testCtx(t), msg(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	here.WakeAll() // as after the watcher reconnected: notices were lost
	for i, ch := range chs {
		select {
		case o := <-ch:
			if o.err != nil || len(o.evs) != 1 || o.evs[0].Seq != 1 {
				t.Fatalf("stream %d after WakeAll: %v, %v", i, o.evs, o.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("WakeAll did not wake stream %d", i)
		}
	}
}

func TestNotifyPastWhatThisNodePublishedDropsItsStaleEnd(t *testing.T) {
	// "here" owned the session and wrote 1..10; "there" took it over and
	// wrote 11..20; then "here" got it back and writes again.
	store := newStore(t, "s1")
	here := openLog(t, store, Options{})
	there := openLog(t, store, Options{})
	for i := range 10 {
		if _, err := here.AppendSync(testCtx(t), msg("s1", i)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := here.Stream(testCtx(t), "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	collect(t, st, 1, 10)
	var evs []berth.Event
	for i := range 10 {
		evs = append(evs, msg("s1", 100+i))
	}
	if _, err := there.AppendSync(testCtx(t), evs...); err != nil {
		t.Fatal(err)
	}
	here.Notify("s1", 20)
	collect(t, st, 11, 20)
	got, err := here.AppendSync(testCtx(t), msg("s1", 200))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Seq != 21 {
		t.Fatalf("the next write here got seq %d, want 21", got[0].Seq)
	}
	collect(t, st, 21, 21)
	contiguous(t, stored(t, store, "s1"))
}

func TestReleaseThenWakeServesTheNewOwnersEvents(t *testing.T) {
	store := newStore(t, "s1")
	here := openLog(t, store, Options{})
	there := openLog(t, store, Options{})
	for i := range 5 {
		if _, err := here.AppendSync(testCtx(t), msg("s1", i)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := here.Stream(testCtx(t), "s1", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	collect(t, st, 4, 5)
	// This node lost the lease: it releases the session; the new owner
	// writes, and a bare Wake (no seq) is all this node hears.
	here.Release("s1")
	if _, err := there.AppendSync(testCtx(t), msg("s1", 6), msg("s1", 7), msg("s1", 8)); err != nil {
		t.Fatal(err)
	}
	here.Wake("s1")
	collect(t, st, 6, 8)
	// Written here again, after the release, the log goes on from the
	// store's end.
	got, err := here.AppendSync(testCtx(t), msg("s1", 9))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Seq != 9 {
		t.Fatalf("the next write here got seq %d, want 9", got[0].Seq)
	}
	contiguous(t, stored(t, store, "s1"))
}

func TestNotifyOfOwnCommits(t *testing.T) {
	t.Run("already published: nobody is woken", func(t *testing.T) {
		h := newHub(16, 0, 0)
		h.publish([]berth.Event{{SessionID: "s", Seq: 1, Type: "x"}, {SessionID: "s", Seq: 2, Type: "x"}})
		wake := h.notify
		h.notice(2)
		if isDone(wake) {
			t.Fatal("a notice of a published seq woke the readers")
		}
		if _, ok := h.committed(); !ok {
			t.Fatal("a notice of a published seq dropped the hub's end")
		}
	})
	t.Run("notice before publish: the publish restores the end", func(t *testing.T) {
		h := newHub(16, 0, 0)
		h.publish([]berth.Event{{SessionID: "s", Seq: 1, Type: "x"}})
		h.notice(3)
		if _, ok := h.committed(); ok {
			t.Fatal("a notice past the hub's end left it known")
		}
		h.publish([]berth.Event{{SessionID: "s", Seq: 2, Type: "x"}, {SessionID: "s", Seq: 3, Type: "x"}})
		if last, ok := h.committed(); !ok || last != 3 {
			t.Fatalf("after publishing up to the notice: last %d known %v", last, ok)
		}
	})
	t.Run("another node went further: the publish does not trust its end", func(t *testing.T) {
		h := newHub(16, 0, 0)
		h.notice(9)
		h.publish([]berth.Event{{SessionID: "s", Seq: 1, Type: "x"}})
		if _, ok := h.committed(); ok {
			t.Fatal("the hub trusts seq 1 as the end while seq 9 is committed")
		}
		h.load(5, "x")
		if _, ok := h.committed(); ok {
			t.Fatal("the hub trusts a store read older than a notice")
		}
		h.load(9, "x")
		if _, ok := h.committed(); !ok {
			t.Fatal("a store read up to the notice is not trusted")
		}
	})
}
