package testenv

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// errRecorder is a testing.TB that records the errors a test was failed with.
type errRecorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, sprintf(format, args...))
}

func (r *errRecorder) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// stuckOn blocks until ctx ends: a frame the stacks must show.
func stuckOn(done <-chan struct{}) { <-done }

// An operation past its bound fails the test, naming it, with the stack
// of the goroutine it holds up; one that returns in time fails nothing,
// and its watchdog says nothing afterwards.
func TestBoundFailsAHungOperationWithTheStacks(t *testing.T) {
	r := &errRecorder{TB: t}
	_, done := Bound(r, "the stuck call", 20*time.Millisecond)
	release, returned := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(returned)
		defer done()
		stuckOn(release)
	}()
	WaitFor(t, 10*time.Second, "the watchdog's failure", func() bool { return len(r.failures()) > 0 })
	close(release)
	<-returned
	errs := r.failures()
	if len(errs) != 1 || !strings.Contains(errs[0], "the stuck call: still running after 20ms") ||
		!strings.Contains(errs[0], "testenv.stuckOn") || !strings.Contains(errs[0], "goroutine ") {
		t.Fatalf("failures: %q", errs)
	}

	r = &errRecorder{TB: t}
	ctx, done := Bound(r, "a quick call", 50*time.Millisecond)
	done()
	if ctx.Err() == nil {
		t.Fatal("the context outlived done")
	}
	time.Sleep(100 * time.Millisecond) // past the bound: the watchdog stays quiet
	if errs := r.failures(); len(errs) != 0 {
		t.Fatalf("failures of a call that returned: %q", errs)
	}
}

// boundHangEnv makes the test binary run an operation that ignores its
// bound (TestBoundEndsTheProcessOfAnOperationThatIgnoresIt).
const boundHangEnv = "BERTH_TESTENV_BOUND_HANG"

// An operation that ignores its context past BoundGrace ends the process
// with every goroutine's stack on stderr and a panic naming the test and
// the operation, instead of holding the package until go test's timeout.
func TestBoundEndsTheProcessOfAnOperationThatIgnoresIt(t *testing.T) {
	if os.Getenv(boundHangEnv) == "1" {
		BoundGrace = 20 * time.Millisecond
		_, done := Bound(t, "the deaf call", 20*time.Millisecond)
		defer done()
		stuckOn(make(chan struct{}))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBoundEndsTheProcessOfAnOperationThatIgnoresIt$")
	cmd.Env = append(os.Environ(), boundHangEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "panic: TestBoundEndsTheProcessOfAnOperationThatIgnoresIt: the deaf call hung") ||
		!strings.Contains(string(out), "the deaf call still running") || !strings.Contains(string(out), "testenv.stuckOn") {
		t.Fatalf("the hung process: %v\n%s", err, out)
	}
}
