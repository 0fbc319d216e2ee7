package bwrap

import (
	"context"
	"errors"
	"testing"
	"time"
)

// poll asks until it is told done, and no longer: a failure, the
// deadline and ctx each end it with their error.
func TestPoll(t *testing.T) {
	ctx := context.Background()
	n := 0
	if err := poll(ctx, time.Now().Add(time.Minute), "it", func() (bool, error) { n++; return n == 5, nil }); err != nil || n != 5 {
		t.Errorf("poll until the fifth call: %v after %d calls", err, n)
	}
	boom := errors.New("boom")
	if err := poll(ctx, time.Now().Add(time.Minute), "it", func() (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("a failure: %v", err)
	}
	if err := poll(ctx, time.Now().Add(30*time.Millisecond), "it", func() (bool, error) { return false, nil }); err == nil || err.Error() != "timed out waiting for it" {
		t.Errorf("past the deadline: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	calls := 0
	err := poll(cctx, time.Now().Add(time.Minute), "it", func() (bool, error) {
		if calls++; calls == 3 {
			cancel()
		}
		return false, nil
	})
	if !errors.Is(err, context.Canceled) || calls != 3 {
		t.Errorf("ctx cancelled at the third call: %v after %d calls", err, calls)
	}
}
