package eventlog

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// waitFailures waits until the log has seen n failed requests.
func waitFailures(t *testing.T, l *Log, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		got := l.failures
		l.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d failures, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A failed Append is reported to a FlushSession of its own session only,
// once: a deleted session's not_found never reaches another session's
// caller, nor does a store failure of one session's events.
func TestFlushSessionReportsOnlyItsOwnFailures(t *testing.T) {
	store := newHookStore(newStore(t, "a", "b"))
	l := openLog(t, store, Options{})

	// A session that does not exist (deleted): nobody is told.
	if err := l.Append(testCtx(t), msg("ghost", 1)); err != nil {
		t.Fatal(err)
	}
	waitFailures(t, l, 1)
	if err := l.FlushSession(testCtx(t), "a"); err != nil {
		t.Fatalf("a's flush after a deleted session's append failed = %v", err)
	}

	// A store failure of b's events reaches b, not a.
	store.before = func(evs []berth.Event) error {
		for _, e := range evs {
			if e.SessionID == "b" {
				return errors.New("disk full")
			}
		}
		return nil
	}
	if err := l.Append(testCtx(t), msg("b", 1)); err != nil {
		t.Fatal(err)
	}
	waitFailures(t, l, 2)
	store.before = nil
	if err := l.FlushSession(testCtx(t), "a"); err != nil {
		t.Fatalf("a's flush after b's append failed = %v", err)
	}
	wantCode(t, l.FlushSession(testCtx(t), "b"), berth.EInternal)
	if err := l.FlushSession(testCtx(t), "b"); err != nil {
		t.Fatalf("b's failure reported twice: %v", err)
	}
	// The whole-log Flush still reports what no session's flush did.
	if err := l.Append(testCtx(t), msg("ghost", 2)); err != nil {
		t.Fatal(err)
	}
	waitFailures(t, l, 3)
	wantCode(t, l.Flush(testCtx(t)), berth.ENotFound)
}

// Settled waits for what was appended before it and takes no failure
// from the Flush of the caller that appended it.
func TestSettledLeavesFailuresToTheirFlush(t *testing.T) {
	store := newHookStore(newStore(t, "a", "b"))
	l := openLog(t, store, Options{})
	store.before = func(evs []berth.Event) error {
		for _, e := range evs {
			if e.SessionID == "b" {
				return errors.New("disk full")
			}
		}
		return nil
	}
	if err := l.Append(testCtx(t), msg("a", 1), msg("b", 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Settled(testCtx(t)); err != nil {
		t.Fatalf("Settled reported %v", err)
	}
	l.mu.Lock()
	failures := l.failures
	l.mu.Unlock()
	if failures != 1 {
		t.Fatalf("Settled returned before the append was settled (%d failures)", failures)
	}
	store.before = nil
	wantCode(t, l.FlushSession(testCtx(t), "b"), berth.EInternal)
}
