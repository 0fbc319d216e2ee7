// Package syncx holds the small synchronisation helpers berth's packages
// share.
package syncx

import (
	"context"
	"sync"
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
