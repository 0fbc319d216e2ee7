package eventlog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func TestRing(t *testing.T) {
	r := ring{size: 4}
	if r.after(0, 10) != nil || r.last() != 0 {
		t.Fatal("empty ring serves events")
	}
	seqs := func(evs []berth.Event) []int64 {
		var out []int64
		for _, e := range evs {
			out = append(out, e.Seq)
		}
		return out
	}
	push := func(from, to int64) {
		var evs []berth.Event
		for s := from; s <= to; s++ {
			evs = append(evs, berth.Event{Seq: s})
		}
		r.push(evs)
	}
	push(1, 3) // growing: 1 2 3
	if got := seqs(r.after(0, 10)); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("after 0: %v", got)
	}
	push(4, 6) // wrapped: 3 4 5 6
	cases := []struct {
		pos   int64
		limit int
		want  []int64
	}{
		{0, 10, nil}, // 1 fell out
		{1, 10, nil}, // 2 fell out
		{2, 10, []int64{3, 4, 5, 6}},
		{3, 2, []int64{4, 5}},
		{5, 10, []int64{6}},
		{6, 10, nil},
		{9, 10, nil},
	}
	for _, c := range cases {
		got := seqs(r.after(c.pos, c.limit))
		if len(got) != len(c.want) {
			t.Fatalf("after %d limit %d: %v, want %v", c.pos, c.limit, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("after %d limit %d: %v, want %v", c.pos, c.limit, got, c.want)
			}
		}
	}
	push(7, 20) // more than the ring holds at once: 17..20
	if got := seqs(r.after(16, 10)); len(got) != 4 || got[0] != 17 || r.last() != 20 {
		t.Fatalf("after a big push: %v", got)
	}
	// Copies, not views: a reader may keep them while the ring moves on.
	got := r.after(16, 1)
	push(21, 24)
	if got[0].Seq != 17 {
		t.Fatal("after returned a view into the ring")
	}
	r.reset()
	if r.after(0, 10) != nil || len(r.buf) != 0 {
		t.Fatal("reset kept events")
	}
}

func TestBudgetFIFO(t *testing.T) {
	b := newBudget(10)
	ctx := context.Background()
	if err := b.acquire(ctx, 8); err != nil {
		t.Fatal(err)
	}
	// A waiter for 5 queues; a later one for 1 would fit, but must not
	// overtake it.
	var wg sync.WaitGroup
	for k, n := range []int{5, 1} {
		wg.Go(func() {
			if err := b.acquire(ctx, n); err != nil {
				t.Error(err)
			}
		})
		waitWaiters(b, k+1)
	}
	if used := b.inUse(); used != 8 {
		t.Fatalf("in use %d: a waiter overtook the queue", used)
	}
	b.release(8)
	wg.Wait()
	if b.inUse() != 6 {
		t.Fatalf("in use %d, want 6", b.inUse())
	}
	b.release(6)

	// Bigger than the whole budget: granted alone.
	if err := b.acquire(ctx, 25); err != nil || b.inUse() != 25 {
		t.Fatalf("oversized acquire: %v, in use %d", err, b.inUse())
	}
	b.release(25)
}

func TestBudgetCancelAndClose(t *testing.T) {
	b := newBudget(4)
	bg := context.Background()
	if err := b.acquire(bg, 4); err != nil {
		t.Fatal(err)
	}
	// The front waiter gives up: the one behind it must still be served.
	ctx, cancel := context.WithCancel(bg)
	front := make(chan error, 1)
	go func() { front <- b.acquire(ctx, 4) }()
	waitWaiters(b, 1)
	behind := make(chan error, 1)
	go func() { behind <- b.acquire(bg, 1) }()
	waitWaiters(b, 2)
	cancel()
	if err := <-front; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	b.release(1)
	if err := <-behind; err != nil {
		t.Fatal(err)
	}
	if b.inUse() != 4 {
		t.Fatalf("in use %d, want 4", b.inUse())
	}
	// Closing fails the waiting and the future.
	waiting := make(chan error, 1)
	go func() { waiting <- b.acquire(bg, 2) }()
	waitWaiters(b, 1)
	b.close()
	wantCode(t, <-waiting, berth.EUnavailable)
	wantCode(t, b.acquire(bg, 1), berth.EUnavailable)
	b.close()
}

// waitWaiters waits until n producers wait on b.
func waitWaiters(b *budget, n int) {
	for {
		b.mu.Lock()
		k := b.waiters.Len()
		b.mu.Unlock()
		if k >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCloseReleasesBlockedProducers(t *testing.T) {
	store, g := gatedStore(t, "a")
	l := startLog(t, store, Options{QueueSize: 2})
	appendN(t, l, "a", 2)
	<-g.entered
	blocked := make(chan error, 1)
	go func() { blocked <- l.Append(testCtx(t), msg("a", 2)) }()
	waitWaiters(l.budget, 1)
	closed := make(chan error, 1)
	go func() { closed <- l.Close(testCtx(t)) }()
	wantCode(t, <-blocked, berth.EUnavailable)
	g.release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if evs := stored(t, store.Store, "a"); len(evs) != 2 {
		t.Fatalf("stored %d events, want the 2 accepted ones", len(evs))
	}
	if used := l.budget.inUse(); used != 0 {
		t.Fatalf("%d units still held", used)
	}
}
