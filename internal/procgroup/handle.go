package procgroup

import (
	"context"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/core"
)

// Handle is what the implementations of core.Process share: our ends of
// the process's standard streams, the channel closed once it has ended,
// its status, and Stop's escalation. Proc and the sandboxes' processes
// embed it, so its Stdin, Stdout, Stderr, Done and Wait are theirs; each
// says how its group is signalled and when it has ended.
type Handle struct {
	stdin          io.WriteCloser
	stdout, stderr io.ReadCloser

	// done is closed once ended has set status and err.
	done   chan struct{}
	status core.ExitStatus
	err    error

	// killed is set once an Escalate has sent SIGKILL.
	killed atomic.Bool
	// stopSem serialises Escalate calls while letting each honour its
	// ctx.
	stopSem chan struct{}
}

// NewHandle returns the Handle of a process that has not ended yet, with
// our ends of its streams (each nil where the caller gave a stream of its
// own), and ended, which records how the process ended and wakes every
// waiter: it is called once.
func NewHandle(stdin io.WriteCloser, stdout, stderr io.ReadCloser) (h *Handle, ended func(core.ExitStatus, error)) {
	h = &Handle{stdin: stdin, stdout: stdout, stderr: stderr, done: make(chan struct{}), stopSem: make(chan struct{}, 1)}
	return h, h.ended
}

// ended records how the process ended and wakes every waiter.
func (h *Handle) ended(status core.ExitStatus, err error) {
	h.status, h.err = status, err
	close(h.done)
}

// Stdin is our end of the process's stdin, or nil when the caller gave a
// reader. Closing it closes the process's stdin.
func (h *Handle) Stdin() io.WriteCloser { return h.stdin }

// Stdout is our end of the process's stdout, or nil when the caller gave
// a writer.
func (h *Handle) Stdout() io.ReadCloser { return h.stdout }

// Stderr is our end of the process's stderr, or nil when the caller gave
// a writer.
func (h *Handle) Stderr() io.ReadCloser { return h.stderr }

// Done is closed once the process has ended and its status is known.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Wait waits for the process to end and returns its status. Any number of
// goroutines may call it; all get the same answer. The error is not about
// the exit status (a non-zero exit is not an error) but about the
// process's I/O.
func (h *Handle) Wait() (core.ExitStatus, error) {
	<-h.done
	return h.status, h.err
}

// Escalate is Stop's way with the process, through signal, which reaches
// its whole group and takes an empty group for success: SIGTERM, then up
// to grace for exited (closed when the leader is gone, which may be before
// the process has ended) or ctx, then SIGKILL whatever the leader did, so
// that what it left behind dies too. It returns nil once Done is closed,
// the first failing signal's error, or ctx's error if ctx ends first
// (SIGKILL is still sent, early). It is safe to call concurrently; once
// one call has sent SIGKILL, later ones only wait.
func (h *Handle) Escalate(ctx context.Context, grace time.Duration, exited <-chan struct{}, signal func(syscall.Signal) error) error {
	select {
	case h.stopSem <- struct{}{}:
	case <-ctx.Done():
		// Another call holds the group; with no time left, kill it now
		// rather than leave it to that call's grace.
		_ = signal(syscall.SIGKILL)
		return ctx.Err()
	}
	defer func() { <-h.stopSem }()
	if ctx.Err() != nil {
		// No time for a grace period: go straight to SIGKILL.
		grace = 0
	}
	if !h.killed.Load() {
		if err := escalate(ctx, grace, exited, signal); err != nil {
			return err
		}
		h.killed.Store(true)
	}
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
