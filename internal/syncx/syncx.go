// Package syncx holds the small synchronisation helpers berth's packages
// share.
package syncx

import (
	"context"
	"sync"
	"time"
)

// Wait waits for wg, or until ctx ends (then it returns ctx.Err()). The
// goroutine that waits for wg ends with wg, even when ctx ended first.
func Wait(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Tail is a writer that keeps the last max bytes written to it (a child's
// stderr, say), safe for concurrent use.
type Tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

// NewTail returns a Tail that keeps max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write keeps the tail of what was written with p.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		// Moved to the front: the buffer grows no larger than max and one write.
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// Bytes returns a copy of what is kept.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

// String returns what is kept.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// Sleep waits d or until ctx ends, and reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
