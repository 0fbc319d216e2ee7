package testenv

import (
	"testing"
	"time"
)

// pollEvery is how often WaitFor asks its condition again.
const pollEvery = 5 * time.Millisecond

// WaitFor polls cond until it holds, and fails the test (saying it waited
// for what) when it does not within the time given.
func WaitFor(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", within, what)
			return
		}
		time.Sleep(pollEvery)
	}
}
