package live

import (
	"testing"
	"time"
)

// A Hush counts holds, each released once however often its release is
// called; it is quiet with none, and a wait ends at quiet, at its bound
// or when told.
func TestHushCountsHolds(t *testing.T) {
	h := NewHush(time.Minute)
	isQuiet := func() bool {
		select {
		case <-h.Quiet():
			return true
		default:
			return false
		}
	}
	if !isQuiet() || h.Waiting() != 0 {
		t.Fatal("a new Hush is not quiet")
	}
	r1, r2 := h.hold(), h.hold()
	r1()
	r1()
	if isQuiet() || h.Waiting() != 1 {
		t.Fatalf("one hold released twice: waiting %d, quiet %v", h.Waiting(), isQuiet())
	}
	quiet := h.Quiet()
	done := make(chan bool)
	go func() { done <- h.wait(nil) }()
	r2()
	if !<-done || !isQuiet() {
		t.Fatal("the last release did not make the Hush quiet")
	}
	select {
	case <-quiet:
	default:
		t.Fatal("the channel Quiet gave while held was not closed at quiet")
	}
	// Bounded: a hold never released holds a wait for the bound only.
	short := NewHush(50 * time.Millisecond)
	short.hold()
	began := time.Now()
	if short.wait(nil) || time.Since(began) < 50*time.Millisecond {
		t.Fatalf("a wait on a held Hush returned quiet, or before its bound (%s)", time.Since(began))
	}
	stop := make(chan struct{})
	close(stop)
	if h.hold(); h.wait(stop) {
		t.Fatal("a wait told to stop returned quiet")
	}
	var none *Hush
	if !none.wait(nil) || none.Waiting() != 0 {
		t.Fatal("a nil Hush is not quiet")
	}
	none.hold()()
}

// A wait returns only once the Hush has been quiet for HushSettle with no
// turn begun: a turn that begins just after the last one spoke (the next
// prompt of a burst) keeps it waiting until that one speaks too, and
// HushSettle more.
func TestHushWaitsForQuietToSettle(t *testing.T) {
	h := NewHush(time.Minute)
	began := time.Now()
	if !h.wait(nil) || time.Since(began) < HushSettle {
		t.Fatalf("a wait on a quiet Hush returned after %s, before it settled (%s)", time.Since(began), HushSettle)
	}
	r1 := h.hold()
	done := make(chan time.Time, 1)
	go func() {
		h.wait(nil)
		done <- time.Now()
	}()
	r1()
	// The burst's next turn, microseconds after the first one spoke.
	r2 := h.hold()
	time.Sleep(2 * HushSettle)
	select {
	case at := <-done:
		t.Fatalf("the wait returned %s after the first turn spoke, with a second one waiting", at.Sub(began))
	default:
	}
	spoke := time.Now()
	r2()
	if at := <-done; at.Sub(spoke) < HushSettle {
		t.Fatalf("the wait returned %s after the last turn spoke, before it settled (%s)", at.Sub(spoke), HushSettle)
	}
}
