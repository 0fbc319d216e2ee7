package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// ContextTimeout bounds the context Context gives a test.
const ContextTimeout = 2 * time.Minute

// contexts holds the context of each running test, see Context.
var contexts sync.Map // testing.TB → context.Context

// Context is the context of a test's calls into a store or a log: bounded
// (ContextTimeout), so that a deadlock fails the test instead of hanging
// it, ended with the test, and made once per test however often it is
// asked for.
func Context(tb testing.TB) context.Context {
	if c, ok := contexts.Load(tb); ok {
		return c.(context.Context)
	}
	c, cancel := context.WithTimeout(context.Background(), ContextTimeout)
	if prev, loaded := contexts.LoadOrStore(tb, c); loaded {
		cancel()
		return prev.(context.Context)
	}
	tb.Cleanup(func() {
		contexts.Delete(tb)
		cancel()
	})
	return c
}
