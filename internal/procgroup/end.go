package procgroup

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
)

// End is how a started process ends, as the callers of its berth.Process
// see it: the channel closed once it has ended, its status, and Stop's
// escalation. Proc and the sandboxes' processes share it; each keeps how
// its group is signalled and when it counts as ended.
type End struct {
	// done is closed once Exited has set status and err.
	done   chan struct{}
	status berth.ExitStatus
	err    error

	// killed is set once a Stop has sent SIGKILL.
	killed atomic.Bool
	// stopSem serialises Stop calls while letting each honour its ctx.
	stopSem chan struct{}
}

// NewEnd returns the End of a process that has not ended yet.
func NewEnd() *End {
	return &End{done: make(chan struct{}), stopSem: make(chan struct{}, 1)}
}

// Exited records how the process ended and wakes every waiter. It is
// called once.
func (e *End) Exited(status berth.ExitStatus, err error) {
	e.status, e.err = status, err
	close(e.done)
}

// Done is closed once the process has ended and its status is known.
func (e *End) Done() <-chan struct{} { return e.done }

// Wait waits for the process to end and returns what Exited recorded. Any
// number of goroutines may call it; all get the same answer.
func (e *End) Wait() (berth.ExitStatus, error) {
	<-e.done
	return e.status, e.err
}

// Stop stops the process through signal, which reaches its whole group
// and takes an empty group for success: SIGTERM, then up to grace for
// exited (closed when the leader is gone, which may be before the process
// has ended) or ctx, then SIGKILL whatever the leader did, so that what
// it left behind dies too. It returns nil once Done is closed, the first
// failing signal's error, or ctx's error if ctx ends first (SIGKILL is
// still sent, early). Stop is safe to call concurrently; once one call
// has sent SIGKILL, later ones only wait.
func (e *End) Stop(ctx context.Context, grace time.Duration, exited <-chan struct{}, signal func(syscall.Signal) error) error {
	select {
	case e.stopSem <- struct{}{}:
	case <-ctx.Done():
		// Another Stop holds the group; with no time left, kill it now
		// rather than leave it to that call's grace.
		_ = signal(syscall.SIGKILL)
		return ctx.Err()
	}
	defer func() { <-e.stopSem }()
	if ctx.Err() != nil {
		// No time for a grace period: go straight to SIGKILL.
		grace = 0
	}
	if !e.killed.Load() {
		if err := escalate(ctx, grace, exited, signal); err != nil {
			return err
		}
		e.killed.Store(true)
	}
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
