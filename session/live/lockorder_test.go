package live

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/lockcheck"
	"github.com/berth-sh/berth/store/memory"
)

// Every path of the package takes its locks in the order Session writes
// down once, and calls no Host callback holding one of them (nor a func
// an exported method was handed, like Rewind's othersBusy): what
// internal/lockcheck follows, and how it catches the paths that do not,
// its own tests show on planted ones. Every mutex of the package must be
// in the order.
func TestLockOrder(t *testing.T) {
	order, err := lockcheck.ReadOrder(".")
	if err != nil {
		t.Fatal(err)
	}
	callbacks, err := lockcheck.ReadCallbacks(".", "Host")
	if err != nil {
		t.Fatal(err)
	}
	if len(callbacks) == 0 {
		t.Fatal("Host declares no callbacks")
	}
	found, err := lockcheck.Check(".", lockcheck.Spec{Order: order, Callbacks: callbacks,
		LockedSuffix: "Locked", Locked: "Session.mu"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// lostStore refuses every write of a session once lost is set, as a
// cluster's store refuses a node whose lease another node took over.
type lostStore struct {
	berth.Store
	lost atomic.Bool
}

func (s *lostStore) UpdateSession(ctx context.Context, sess *berth.Session, from berth.State) error {
	if s.lost.Load() {
		return berth.Errorf(berth.ELeaseLost, "session %s is now driven by another node", sess.ID)
	}
	return s.Store.UpdateSession(ctx, sess, from)
}

// A write the store refuses for a lease lost is told to the manager
// (Host.LeaseLost) once the session holds none of its locks, from every
// path that saves holding them: a turn's end (recordMu, mu), a patch
// (the controls lock, mu), an interrupt (mu) and a clear (authMu, mu).
// Told under one, the manager's callback could not take it, as here.
func TestLeaseLostIsToldHoldingNoLock(t *testing.T) {
	st := &lostStore{Store: memory.New()}
	var (
		cur  atomic.Pointer[Session]
		mu   sync.Mutex
		told []string
	)
	hs := newHarness(t, func(h *Host) {
		h.Store = st
		h.LeaseLost = func(string) {
			held := heldLocks(cur.Load())
			mu.Lock()
			told = append(told, held)
			mu.Unlock()
		}
	})
	ls := hs.start()
	cur.Store(ls)
	ctx := context.Background()
	st.lost.Store(true)
	input := func(text string) Input {
		in, err := ls.ResolveInput(ctx, berth.PromptRequest{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	for _, c := range []struct {
		path string
		do   func()
	}{
		{"a turn's end", func() { hs.prompt(ls, "echo one") }},
		{"a patch", func() {
			if _, err := ls.Patch(ctx, berth.SessionPatch{Mode: "plan"}); !berth.IsCode(err, berth.EUnavailable) {
				t.Fatalf("patch: %v, want the agent's mode not recorded", err)
			}
		}},
		{"an interrupt", func() {
			if _, err := ls.Prompt(ctx, berth.ModeQueue, input("sleep 20000")); err != nil {
				t.Fatal(err)
			}
			if _, err := ls.Prompt(ctx, berth.ModeInterrupt, input("echo two")); !berth.IsCode(err, berth.ELeaseLost) {
				t.Fatalf("interrupt: %v, want the lease lost", err)
			}
		}},
		{"a clear", func() {
			if _, err := ls.Clear(ctx, true); !berth.IsCode(err, berth.ELeaseLost) {
				t.Fatalf("clear: %v, want the lease lost", err)
			}
		}},
	} {
		c.do()
		waitFor(t, c.path+" to tell of the lease lost", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(told) > 0
		})
		mu.Lock()
		for _, held := range told {
			if held != "" {
				t.Errorf("after %s, the lease lost was told holding %s", c.path, held)
			}
		}
		told = told[:0]
		mu.Unlock()
	}
}

// heldLocks names the locks of ls its caller holds: those still taken
// after a while (another goroutine lets go of one soon).
func heldLocks(ls *Session) string {
	var held []string
	for _, l := range []struct {
		name   string
		try    func() bool
		unlock func()
	}{
		{"authMu", ls.conv.authMu.TryLock, ls.conv.authMu.Unlock},
		{"controls", ls.controls.mu.TryLock, ls.controls.mu.Unlock},
		{"recordMu", ls.recordMu.TryLock, ls.recordMu.Unlock},
		{"mu", ls.mu.TryLock, ls.mu.Unlock},
	} {
		deadline := time.Now().Add(3 * time.Second)
		for !l.try() {
			if time.Now().After(deadline) {
				held = append(held, l.name)
				break
			}
			time.Sleep(time.Millisecond)
		}
		if len(held) == 0 || held[len(held)-1] != l.name {
			l.unlock()
		}
	}
	return strings.Join(held, ", ")
}
