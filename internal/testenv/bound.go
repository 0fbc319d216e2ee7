package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"testing"
	"time"
)

// BoundGrace is how long an operation may run past its bound, once the
// test failed with the stacks, before Bound ends the process.
var BoundGrace = time.Minute

// Bound bounds one blocking operation of a test, named what: the
// context it returns ends after within, and done must be called once the
// operation has returned (or the test ended). An operation still running at its bound fails
// the test with every goroutine's stack in the test's log, so a deadlock
// shows both of its sides and the operation it held up. One that still
// runs BoundGrace later ignores its context and would hold the package
// up to go test's timeout, whose dump does not show the test's log: the
// stacks go to stderr and the process panics naming the test and the
// operation.
func Bound(tb testing.TB, what string, within time.Duration) (ctx context.Context, done func()) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	name := tb.Name()
	var mu sync.Mutex
	returned := false
	var grace *time.Timer
	watch := time.AfterFunc(within, func() {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			return
		}
		tb.Errorf("%s: still running after %s; every goroutine:\n%s", what, within, Stacks())
		grace = time.AfterFunc(BoundGrace, func() {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				return
			}
			fmt.Fprintf(os.Stderr, "%s: %s still running %s past its bound of %s; every goroutine:\n%s",
				name, what, BoundGrace, within, Stacks())
			panic(fmt.Sprintf("%s: %s hung", name, what))
		})
	})
	done = func() {
		// Under mu: a watchdog that fired has written to the test's log
		// before the test may end.
		mu.Lock()
		returned = true
		watch.Stop()
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
		cancel()
	}
	// An operation on a goroutine of its own may outlive a test that
	// failed otherwise: its watchdog ends with the test.
	tb.Cleanup(done)
	return ctx, done
}

// Stacks is every goroutine's stack, as an unrecovered panic prints them
// (the goroutine profile, debug=2).
func Stacks() string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return b.String()
}
