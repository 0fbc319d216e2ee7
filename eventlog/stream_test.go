package eventlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"golang.org/x/sync/errgroup"
)

func TestStreamFromPosition(t *testing.T) {
	// One session per start position, each with 50 events; the ring holds
	// 16 (35..50), so early positions read their first page from the store.
	starts := []int64{0, 20, 40, 49, 50, 60}
	sessions := ids(len(starts))
	store := newStore(t, sessions...)
	l := openLog(t, store, Options{RingSize: 16})
	for _, id := range sessions {
		for i := range 50 {
			if err := l.Append(testCtx(t), msg(id, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for k, after := range starts {
		id := sessions[k]
		st, err := l.Stream(testCtx(t), id, after)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		next := after + 1
		for next <= 50 {
			evs, err := st.Next(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.Seq != next || e.SessionID != id {
					t.Fatalf("after %d: got seq %d of %s, want %d", after, e.Seq, e.SessionID, next)
				}
				next++
			}
		}
		// Then live events, as they commit; a stream that starts past the
		// end sees only what comes after its position.
		for range 12 {
			if _, err := l.AppendSync(testCtx(t), msg(id, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		want := max(after+1, 51)
		evs, err := st.Next(testCtx(t))
		if err != nil || len(evs) == 0 || evs[0].Seq != want {
			t.Fatalf("after %d: live events %+v, %v; want from %d", after, evs, err, want)
		}
	}
}

func TestStreamErrors(t *testing.T) {
	store := newStore(t, "a")
	l := openLog(t, store, Options{})
	_, err := l.Stream(testCtx(t), "nope", 0)
	wantCode(t, err, berth.ENotFound)
	_, err = l.Stream(testCtx(t), "a", -1)
	wantCode(t, err, berth.EInvalid)

	st, err := l.Stream(testCtx(t), "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	// ctx ends a waiting Next.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := st.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next with nothing to read: %v", err)
	}
	// Close ends a waiting Next from another goroutine.
	done := make(chan error, 1)
	go func() { _, err := st.Next(testCtx(t)); done <- err }()
	// Close once Next waits, or it would only see a closed stream.
	poll(t, "Next to wait", func() bool { return goroutineIn("eventlog.(*stream).wait(") })
	st.Close()
	st.Close()
	wantCode(t, <-done, berth.EUnavailable)
}

func TestStreamEndsWhenStopped(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	createSessions(t, store, "a")
	l := openLog(t, store, Options{})
	st, err := l.Stream(testCtx(t), "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendN(t, l, "a", 10)
	if err := l.Append(testCtx(t), berth.NewEvent("a", "", berth.EventSessionStopped, nil)); err != nil {
		t.Fatal(err)
	}
	evs, err := readAll(testCtx(t), st)
	wantEOF(t, err)
	contiguous(t, evs)
	if len(evs) != 11 || evs[10].Type != berth.EventSessionStopped {
		t.Fatalf("read %d events before EOF", len(evs))
	}
	if _, err := st.Next(testCtx(t)); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after EOF: %v", err)
	}

	// Opened at or after the end of a stopped session: EOF at once; from
	// before it: the rest, then EOF.
	for _, c := range []struct {
		after int64
		n     int
	}{{11, 0}, {500, 0}, {8, 3}} {
		st, err := l.Stream(testCtx(t), "a", c.after)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := readAll(testCtx(t), st)
		wantEOF(t, err)
		if len(evs) != c.n {
			t.Fatalf("after %d: %d events before EOF, want %d", c.after, len(evs), c.n)
		}
		st.Close()
	}

	// Resumed: a new stream sees what comes after the stop.
	if _, err := l.AppendSync(testCtx(t), berth.NewEvent("a", "", berth.EventSessionStarted, nil)); err != nil {
		t.Fatal(err)
	}
	st2, err := l.Stream(testCtx(t), "a", 11)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	evs, err = st2.Next(testCtx(t))
	if err != nil || len(evs) != 1 || evs[0].Seq != 12 {
		t.Fatalf("after resume: %+v, %v", evs, err)
	}
	if _, err := l.AppendSync(testCtx(t), berth.NewEvent("a", "", berth.EventSessionStopped, nil)); err != nil {
		t.Fatal(err)
	}

	// After a restart the log knows nothing in memory: the store answers.
	if err := l.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, store, Options{})
	for _, after := range []int64{0, 13, 12} {
		st, err := l2.Stream(testCtx(t), "a", after)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := readAll(testCtx(t), st)
		wantEOF(t, err)
		if want := 13 - int(after); len(evs) != want {
			t.Fatalf("restarted, after %d: %d events, want %d", after, len(evs), want)
		}
		st.Close()
	}
}

func TestStreamEndsWhenLogCloses(t *testing.T) {
	store := newStore(t, "a")
	l := startLog(t, store, Options{})
	if _, err := l.AppendSync(testCtx(t), msg("a", 1)); err != nil {
		t.Fatal(err)
	}
	st, err := l.Stream(testCtx(t), "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if evs, err := st.Next(testCtx(t)); err != nil || len(evs) != 1 {
		t.Fatalf("first page: %v, %v", evs, err)
	}
	done := make(chan error, 1)
	go func() { _, err := st.Next(testCtx(t)); done <- err }()
	if err := l.Append(testCtx(t), msg("a", 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The waiting Next either got event 2 or, caught up, learns of the close.
	if err := <-done; err != nil {
		wantCode(t, err, berth.EUnavailable)
	}
	evs, err := readAll(testCtx(t), st)
	wantCode(t, err, berth.EUnavailable)
	if len(evs) > 1 {
		t.Fatalf("read %d events after the close", len(evs))
	}
}

// TestPersistedBeforePublished checks every streamed event against the
// store while producers append: a reader never sees an uncommitted event.
func TestPersistedBeforePublished(t *testing.T) {
	sessions := ids(4)
	store := newStore(t, sessions...)
	l := openLog(t, store, Options{MaxBatch: 64, RingSize: 128})
	per := scale(5000)

	var g errgroup.Group
	for _, id := range sessions {
		st, err := l.Stream(testCtx(t), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		g.Go(func() error {
			next := int64(1)
			for next <= int64(per) {
				evs, err := st.Next(testCtx(t))
				if err != nil {
					return err
				}
				inStore, err := store.ListEvents(testCtx(t), id, berth.EventFilter{After: next - 1, Limit: len(evs)})
				if err != nil {
					return err
				}
				for i, e := range evs {
					if e.Seq != next || i >= len(inStore) || inStore[i].Seq != e.Seq || string(inStore[i].Data) != string(e.Data) {
						return fmt.Errorf("%s: streamed seq %d (want %d) not in the store as streamed", id, e.Seq, next)
					}
					next++
				}
			}
			return nil
		})
		g.Go(func() error {
			for i := range per {
				if err := l.Append(testCtx(t), msg(id, i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestSlowReader has a reader that sleeps between pages while a producer
// appends 200,000 events far faster: it falls behind the ring, catches up
// from the store, and still gets every event once, in order.
func TestSlowReader(t *testing.T) {
	const total = 200_000
	store := newStore(t, "a")
	l := openLog(t, store, Options{RingSize: 256})
	st, err := l.Stream(testCtx(t), "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	produced := make(chan error, 1)
	go func() {
		batch := make([]berth.Event, 0, 100)
		for i := range total {
			batch = append(batch, msg("a", i))
			if len(batch) == cap(batch) || i == total-1 {
				if err := l.Append(testCtx(t), batch...); err != nil {
					produced <- err
					return
				}
				batch = batch[:0]
			}
		}
		produced <- l.Append(testCtx(t), berth.NewEvent("a", "", berth.EventSessionStopped, nil))
	}()

	next, pages, fromStore := int64(1), 0, 0
	for {
		evs, err := st.Next(testCtx(t))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Seq != next {
				t.Fatalf("got seq %d, want %d", e.Seq, next)
			}
			if e.Type == berth.EventAgentMessage {
				if _, i := payload(t, e); i != int(next-1) {
					t.Fatalf("seq %d holds event %d", next, i)
				}
			}
			next++
		}
		pages++
		if len(evs) > 256 {
			fromStore++ // bigger than the ring: it came from the store
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if next != int64(total)+2 {
		t.Fatalf("read up to seq %d, want %d", next-1, total+1)
	}
	if fromStore == 0 {
		t.Fatalf("the reader never fell behind the ring (%d pages): the test proves nothing", pages)
	}
	t.Logf("%d events in %d pages, %d of them from the store", total+1, pages, fromStore)
}

// goroutineIn reports whether a goroutine of this process is in fn, as a
// dump of every goroutine's stack shows it.
func goroutineIn(fn string) bool {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return bytes.Contains(buf[:n], []byte(fn))
}
