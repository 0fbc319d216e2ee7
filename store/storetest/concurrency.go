package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func testConcurrentAppend(t *testing.T, open Opener) {
	s := fresh(t, open)
	const (
		sessions = 16
		batches  = 40
	)
	for i := range sessions {
		create(t, s, newSession(fmt.Sprintf("s%02d", i), base))
	}
	// Each goroutine owns one session's seqs and appends batches of
	// varying size; the backend must serialise them without losing any.
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	total := make([]int64, sessions)
	for i := range sessions {
		wg.Go(func() {
			id := fmt.Sprintf("s%02d", i)
			next := int64(1)
			for b := range batches {
				n := 1 + (b*7+i*3)%23
				if err := s.AppendEvents(ctx(t), events(id, next, n)); err != nil {
					errs <- fmt.Errorf("%s batch %d: %w", id, b, err)
					return
				}
				next += int64(n)
			}
			total[i] = next - 1
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range sessions {
		id := fmt.Sprintf("s%02d", i)
		evs := list(t, s, id, 0)
		if int64(len(evs)) != total[i] || lastSeq(t, s, id) != total[i] {
			t.Fatalf("%s: %d events, last seq %d, want %d", id, len(evs), lastSeq(t, s, id), total[i])
		}
		contiguous(t, evs, 1)
		sameEvents(t, evs, events(id, 1, int(total[i])))
	}
}

func testConcurrentReaders(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s, newSession("s1", base))
	const (
		batches = 200
		size    = 10
	)
	var written atomic.Int64 // the last seq whose batch has committed
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// Readers check that every page they see is a contiguous run from
	// after+1, and that nothing committed is ever missing.
	for r := range 4 {
		wg.Go(func() {
			after := int64(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				floor := written.Load()
				evs, err := s.ListEvents(ctx(t), "s1", berth.EventFilter{After: after, Limit: 1 + r*17})
				if err != nil {
					report(err)
					return
				}
				for i, e := range evs {
					if e.Seq != after+1+int64(i) {
						report(fmt.Errorf("reader %d: seq %d after %d", r, e.Seq, after+int64(i)))
						return
					}
				}
				if len(evs) == 0 && after < floor {
					report(fmt.Errorf("reader %d: nothing after %d although %d is committed", r, after, floor))
					return
				}
				if len(evs) > 0 {
					after = evs[len(evs)-1].Seq
				}
				if n, err := s.LastSeq(ctx(t), "s1"); err != nil || n < floor {
					report(fmt.Errorf("reader %d: last seq %d < committed %d (%v)", r, n, floor, err))
					return
				}
			}
		})
	}
	for b := range batches {
		appendOK(t, s, events("s1", int64(b*size+1), size))
		written.Store(int64((b + 1) * size))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	contiguous(t, list(t, s, "s1", 0), 1)
}

func testReopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	a := newSession("a", base)
	a.Env = map[string]string{"K": "v"}
	a.AgentPID = 77
	a.ShimSocket, a.ShimPID = "/run/berth/shims/a.sock", 76
	b := newSession("b", base.Add(time.Second))
	b.ParentID = "a"
	create(t, s, a, b)
	evs := append(events("a", 1, 1500), events("b", 1, 3)...)
	evs[1499].Source = 1 << 40 // a's agent offset, which must survive the reopen
	appendOK(t, s, evs)
	a.State = berth.StateActive
	if err := s.UpdateSession(ctx(t), a, berth.StateStarting); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	// Opening the same place twice in a row must also work (migrations
	// are idempotent).
	a.LastSeq, b.LastSeq = 1500, 3
	a.AgentOffset = 1 << 40
	for round := range 2 {
		s = open(t, dir)
		sameSession(t, get(t, s, "a"), a)
		sameSession(t, get(t, s, "b"), b)
		sameEvents(t, list(t, s, "a", 0), events("a", 1, 1500))
		sameEvents(t, list(t, s, "b", 0), events("b", 1, int(b.LastSeq)))
		page, err := s.ListSessions(ctx(t), berth.SessionFilter{Parent: "a"})
		if err != nil || ids(page) != "b" {
			t.Fatalf("round %d: children of a: %q, %v", round, ids(page), err)
		}
		if round == 0 {
			appendOK(t, s, events("b", 4, 2))
			b.LastSeq = 5
			if err := s.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			continue
		}
		t.Cleanup(func() { s.Close() })
	}
}
