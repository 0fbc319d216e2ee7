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
