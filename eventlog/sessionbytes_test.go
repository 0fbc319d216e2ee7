package eventlog

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// dataEvent is an agent_message of session whose data is about size bytes.
func dataEvent(session string, size int) berth.Event {
	return berth.NewEvent(session, "", berth.EventAgentMessage, map[string]string{"text": strings.Repeat("x", size-11)})
}

// A session that appends faster than the store commits waits once its
// bytes in flight reach Options.SessionBytes; another session does not.
func TestSessionBytesBoundWhatASessionHoldsInFlight(t *testing.T) {
	store, g := gatedStore(t, "flood", "quiet")
	const budget, size = 8 << 10, 1 << 10
	l := startLog(t, store, Options{SessionBytes: budget})
	defer l.Close(testCtx(t))
	var opened sync.Once
	release := func() { opened.Do(g.release) }
	defer release() // before Close, also when the test fails

	// The first event's commit holds the writer at the gate.
	if err := l.Append(testCtx(t), dataEvent("flood", size)); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	const total = 40
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for range total - 1 {
			if err := l.Append(testCtx(t), dataEvent("flood", size)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	// Until the producer waits for room, or has appended everything.
	deadline := time.Now().Add(20 * time.Second)
	for !isDone(done) && waiting(l.lookup("flood").bytes) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the producer neither waits nor finishes")
		}
		time.Sleep(time.Millisecond)
	}
	if now, _ := l.InFlight("flood"); now > budget || now < budget-size {
		t.Fatalf("%d bytes in flight while the producer waits; want the budget of %d (within one event)", now, budget)
	}
	// Another session's room is its own.
	if err := l.Append(testCtx(t), dataEvent("quiet", size)); err != nil {
		t.Fatal(err)
	}
	release()
	wg.Wait()
	if err := l.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if evs := stored(t, store.Store, "flood"); len(evs) != total {
		t.Fatalf("stored %d events, want %d", len(evs), total)
	}
	now, peak := l.InFlight("flood")
	if now != 0 || peak > budget || peak < budget-size {
		t.Fatalf("in flight %d, peak %d: want 0 and the budget of %d at most", now, peak, budget)
	}
}

// waiting returns how many producers wait on b.
func waiting(b *budget) int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}

// One event larger than the whole budget is admitted alone.
func TestSessionBytesAdmitAnOversizedEventAlone(t *testing.T) {
	base := newStore(t, "a")
	l := New(base, Options{Logger: quiet, SessionBytes: 1 << 10})
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	defer l.Close(testCtx(t))
	for range 3 {
		if _, err := l.AppendSync(testCtx(t), dataEvent("a", 4<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitRoom(testCtx(t), "a", 4<<10); err != nil {
		t.Fatal(err)
	}
	if now, peak := l.InFlight("a"); now != 0 || peak < 4<<10 || peak > 5<<10 {
		t.Fatalf("in flight %d, peak %d", now, peak)
	}
}

// The ring keeps at most maxBytes of event data: a large event committed
// is let go at once instead of staying for the next size events.
func TestRingBoundsItsBytes(t *testing.T) {
	r := ring{size: 100, maxBytes: 3 << 10}
	evs := make([]berth.Event, 5)
	for i := range evs {
		evs[i] = berth.Event{Seq: int64(i + 1), Data: make([]byte, 1<<10)}
	}
	r.push(evs)
	if r.n != 3 || r.bytes != 3<<10 || r.at(0).Seq != 3 || r.after(1, 10) != nil || len(r.after(2, 10)) != 3 {
		t.Fatalf("ring holds %d events, %d bytes, from seq %d", r.n, r.bytes, r.at(0).Seq)
	}
	r.push([]berth.Event{{Seq: 6, Data: make([]byte, 10<<10)}})
	if r.n != 0 || r.bytes != 0 || r.after(5, 10) != nil {
		t.Fatalf("a 10 KiB event stayed: %d events, %d bytes", r.n, r.bytes)
	}
	r.push([]berth.Event{{Seq: 7, Data: []byte(`{}`)}})
	if r.n != 1 || r.last() != 7 {
		t.Fatalf("after a large event: %d events, last %d", r.n, r.last())
	}
}
