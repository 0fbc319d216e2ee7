package procgroup

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/core"
)

// IODelay bounds how long Wait waits, after the leader exits, for I/O
// copying to caller-supplied readers and writers that are not *os.File (a
// background grandchild may hold the output open). Pipes made by StartProc
// and *os.File streams need no copying and are not affected.
const IODelay = 2 * time.Second

// Proc is a process started by StartProc, leader of its own process group.
// It implements core.Process. A background goroutine reaps it as soon as it
// exits, so it never lingers as a zombie, and ends then.
type Proc struct {
	// Handle has the pipes StartProc made and is done once the leader is
	// reaped.
	*Handle
	ended func(core.ExitStatus, error)

	cmd *exec.Cmd
	pid int
	// gone is set when the group was found empty after the leader was
	// reaped: from then on its id may be reused and is never signalled.
	gone atomic.Bool
}

var _ core.Process = (*Proc)(nil)

// StartProc starts cmd as the leader of a new process group and reaps it in
// the background. Unlike exec.Cmd, where a nil stream means /dev/null, each
// of cmd.Stdin, cmd.Stdout and cmd.Stderr left nil gets a pipe whose parent
// end is Proc.Stdin, Proc.Stdout or Proc.Stderr (core.ProcSpec's rule).
//
// The caller owns the Stdout and Stderr read ends: read them to EOF (they
// then close themselves) or Close them. The Stdin write end is closed when
// the leader exits. cmd must not have a Context: a process outlives the
// request that started it and ends through Stop.
func StartProc(cmd *exec.Cmd) (*Proc, error) {
	// childEnds are closed in the parent once the child holds them;
	// ourEnds only if starting fails.
	var childEnds, ourEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			_ = f.Close()
		}
	}
	// pipe makes the pipe of a stream the caller left nil, the child
	// reading it or writing it.
	pipe := func(childReads bool) (child, ours *os.File, err error) {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(childEnds)
			closeAll(ourEnds)
			return nil, nil, err
		}
		child, ours = w, r
		if childReads {
			child, ours = r, w
		}
		childEnds, ourEnds = append(childEnds, child), append(ourEnds, ours)
		return child, ours, nil
	}
	var err error
	var child, ours *os.File
	var stdin io.WriteCloser
	var stdout, stderr io.ReadCloser
	if cmd.Stdin == nil {
		if child, ours, err = pipe(true); err != nil {
			return nil, err
		}
		cmd.Stdin, stdin = child, &pipeWriter{f: ours}
	}
	if cmd.Stdout == nil {
		if child, ours, err = pipe(false); err != nil {
			return nil, err
		}
		cmd.Stdout, stdout = child, NewPipeReader(ours)
	}
	if cmd.Stderr == nil {
		if child, ours, err = pipe(false); err != nil {
			return nil, err
		}
		cmd.Stderr, stderr = child, NewPipeReader(ours)
	}
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = IODelay
	}
	err = Start(cmd)
	// The child has its own copies now; ours would keep the pipes from
	// reporting EOF (stdout/stderr) or EPIPE (stdin).
	closeAll(childEnds)
	if err != nil {
		closeAll(ourEnds)
		return nil, err
	}
	p := &Proc{cmd: cmd, pid: cmd.Process.Pid}
	p.Handle, p.ended = NewHandle(stdin, stdout, stderr)
	go p.reap()
	return p, nil
}

// reap waits for the leader, records its status and wakes every waiter.
func (p *Proc) reap() {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	// A non-zero exit is a status, not an error; ErrWaitDelay only means
	// output written after the leader's exit by its leftovers was cut.
	if errors.As(err, &ee) || errors.Is(err, exec.ErrWaitDelay) {
		err = nil
	}
	// With the leader reaped, an empty group frees its id for reuse: note
	// it now so that no later signal can reach a stranger.
	if !Alive(p.pid) {
		p.gone.Store(true)
	}
	if p.Stdin() != nil {
		_ = p.Stdin().Close()
	}
	p.ended(ExitStatusOf(p.cmd.ProcessState), err)
}

// Pid is the leader's pid, which is also the process group id.
func (p *Proc) Pid() int { return p.pid }

// Signal sends sig to the whole process group, leftovers of an exited
// leader included. It returns os.ErrProcessDone when the group is empty,
// and EInvalid for a signal that is not a syscall.Signal.
func (p *Proc) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return core.Errorf(core.EInvalid, "unsupported signal %v", sig)
	}
	if p.gone.Load() {
		return os.ErrProcessDone
	}
	return Signal(p.pid, s)
}

// signal sends sig to the group for Stop; an empty group is not an error.
func (p *Proc) signal(sig syscall.Signal) error {
	if p.gone.Load() {
		return nil
	}
	if err := Signal(p.pid, sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Stop sends SIGTERM to the group, waits up to grace for the leader, then
// sends SIGKILL to the group, whether or not the leader is still there, and
// returns the leader's status once it is reaped. If ctx ends first it
// returns ctx's error: SIGKILL is still sent (early) and reaping still
// happens in the background. Stop is idempotent and safe to call
// concurrently; later calls do not signal again.
func (p *Proc) Stop(ctx context.Context, grace time.Duration) (core.ExitStatus, error) {
	if err := p.Escalate(ctx, grace, p.Done(), p.signal); err != nil {
		return core.ExitStatus{}, err
	}
	// The leader is reaped; what it started dies of the group's SIGKILL a
	// moment later (reparented, reaped by init).
	p.awaitGroupGone(ctx, groupGoneWait)
	return p.Wait()
}

// groupGoneWait bounds how long Stop waits for the rest of a killed group
// to be gone once its leader is reaped: SIGKILL ends them in microseconds,
// but a member that ends as a zombie of a parent that does not reap (an
// init that is not one) stays in the group for good.
const groupGoneWait = 100 * time.Millisecond

// awaitGroupGone waits, at most max, until no process of the group is
// left (a zombie counts until its parent reaps it).
func (p *Proc) awaitGroupGone(ctx context.Context, max time.Duration) {
	deadline := time.Now().Add(max)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		if err := syscall.Kill(-p.pid, 0); errors.Is(err, syscall.ESRCH) || time.Now().After(deadline) || ctx.Err() != nil {
			return
		}
		time.Sleep(pause)
	}
}

// PipeReader is the parent's read end of an output pipe. It closes itself
// at EOF so that a caller draining it cannot leak the descriptor.
type PipeReader struct {
	f    *os.File
	once sync.Once
	eof  atomic.Bool
}

// NewPipeReader wraps the read end f of a pipe.
func NewPipeReader(f *os.File) *PipeReader { return &PipeReader{f: f} }

// Read reads from the pipe; after EOF it keeps returning io.EOF.
func (r *PipeReader) Read(b []byte) (int, error) {
	if r.eof.Load() {
		return 0, io.EOF
	}
	n, err := r.f.Read(b)
	if err == io.EOF {
		r.eof.Store(true)
		_ = r.Close()
	}
	return n, err
}

// Close closes the pipe; closing twice is not an error.
func (r *PipeReader) Close() error {
	var err error
	r.once.Do(func() { err = r.f.Close() })
	return err
}

// pipeWriter is the parent's write end of the stdin pipe.
type pipeWriter struct {
	f    *os.File
	once sync.Once
}

// Write writes to the pipe.
func (w *pipeWriter) Write(b []byte) (int, error) { return w.f.Write(b) }

// SetWriteDeadline bounds writes, so a peer that stops reading cannot block
// a writer forever.
func (w *pipeWriter) SetWriteDeadline(t time.Time) error { return w.f.SetWriteDeadline(t) }

// Close closes the pipe; closing twice is not an error.
func (w *pipeWriter) Close() error {
	var err error
	w.once.Do(func() { err = w.f.Close() })
	return err
}
