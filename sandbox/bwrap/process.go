package bwrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/procgroup"
	"github.com/berth-sh/berth/internal/syncx"
)

// startTimeout bounds how long Start waits for bwrap to make the sandbox
// when ctx has no earlier deadline.
const startTimeout = 30 * time.Second

// teardownTimeout bounds how long Wait waits, after bwrap exits, for the
// sandbox's pid namespace to be gone. SIGKILL makes it seconds at worst.
const teardownTimeout = 10 * time.Second

// Process is one bwrap and what runs inside it. It implements
// core.Process.
//
// Three processes matter: bwrap outside (Pid, the leader of the process
// group procgroup made), the sandbox's init (bwrap again, pid 1 of the
// pid namespace, killed by the kernel when the outer bwrap dies), and the
// started program, which runs in init's process group. Signals other than
// SIGKILL go to that inner group: bwrap forwards none, and killing the
// outer bwrap ends everything at once. SIGKILL goes to the outer group and
// to init, which takes the whole pid namespace down.
type Process struct {
	// Handle has the outer bwrap's pipes and is done once the outer bwrap
	// is reaped and the pid namespace is gone.
	*procgroup.Handle
	ended func(core.ExitStatus, error)

	sb   *Sandbox
	proc *procgroup.Proc
	// net is the sandbox's user-mode network when it has network on.
	net *userNet
	// init is the host pid of the sandbox's init, whose process group the
	// program runs in; 0 when bwrap ended before we saw it.
	init int

	// mu guards pidfd, which pins init: signals through it never reach a
	// process that took init's pid over. -1 once init is gone.
	mu    sync.Mutex
	pidfd int

	// oomBase is the sandbox's OOM kill count when the process started.
	oomBase int64
}

var _ core.Process = (*Process)(nil)

// info is the part of bwrap's --info-fd report that we use.
type info struct {
	ChildPid int `json:"child-pid"`
}

// attach reads bwrap's report of the sandbox's init from the info pipe,
// pins init with a pidfd and waits until init has forked the program (or
// ended: Wait then says how).
func (p *Process) attach(ctx context.Context, pipe *os.File) error {
	deadline := time.Now().Add(startTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pipe.SetReadDeadline(deadline)
	var in info
	if err := json.NewDecoder(pipe).Decode(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return errNoSandbox
		}
		return fmt.Errorf("reading bwrap's report: %w", err)
	}
	if in.ChildPid <= 1 {
		return fmt.Errorf("bwrap reported child pid %d", in.ChildPid)
	}
	fd, err := unix.PidfdOpen(in.ChildPid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil // already over
	}
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	// The pid is init's only if its parent is still our bwrap: checked
	// after pinning it, a reused pid cannot pass.
	if ppid, err := parentOf(in.ChildPid); err != nil || ppid != p.proc.Pid() {
		_ = unix.Close(fd)
		return nil // bwrap is gone, and the sandbox with it
	}
	p.init, p.pidfd = in.ChildPid, fd
	if p.net != nil {
		if err := p.net.attach(ctx, deadline, in.ChildPid, p.proc.Pid(), fd); err != nil {
			return err
		}
	}
	return poll(ctx, deadline, "bwrap to start the process", func() (bool, error) {
		return exited(fd) || hasChild(in.ChildPid), nil
	})
}

// poll calls done until it says so or fails, ctx ends, or the deadline
// passes (an error naming what): every 50 µs growing to 500 µs for the
// first 20 ms, sleeping on the thread (nanosleep; the runtime's timers
// wake an idle process a millisecond late at best, and a shim waits here
// for its agent to be forked), then every 5 ms.
func poll(ctx context.Context, deadline time.Time, what string, done func() (bool, error)) error {
	began := time.Now()
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 500*time.Microsecond) {
		if ok, err := done(); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for " + what)
		}
		if time.Since(began) < 20*time.Millisecond {
			ts := unix.NsecToTimespec(int64(delay))
			_ = unix.Nanosleep(&ts, nil)
			if err := ctx.Err(); err != nil {
				return err
			}
			continue
		}
		if !syncx.Sleep(ctx, 5*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// parentOf reads pid's parent from /proc.
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	var state byte
	var ppid int
	if _, err := fmt.Sscanf(string(b[i+1:]), " %c %d", &state, &ppid); err != nil {
		return 0, err
	}
	return ppid, nil
}

// hasChild reports whether pid has a child process.
func hasChild(pid int) bool {
	p := strconv.Itoa(pid)
	if b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children"); err == nil {
		return len(bytes.TrimSpace(b)) > 0
	}
	// A kernel without CONFIG_PROC_CHILDREN: look for one.
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if c, err := strconv.Atoi(e.Name()); err == nil && c != pid {
			if ppid, err := parentOf(c); err == nil && ppid == pid {
				return true
			}
		}
	}
	return false
}

// exited reports whether the process behind pidfd has exited.
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// awaitExit waits up to d for the process behind pidfd to exit.
func awaitExit(pidfd int, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(min(left, time.Second)/time.Millisecond)+1)
		if err == nil && n > 0 || err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// reap waits for the outer bwrap, makes sure the pid namespace is gone,
// records the status and wakes every waiter.
func (p *Process) reap() {
	st, err := p.proc.Wait()
	p.teardown()
	st = statusOf(st)
	st.OOMKills = p.sb.cgroup.oomKills() - p.oomBase
	p.sb.forget(p)
	p.ended(st, err)
}

// teardown, once the outer bwrap has exited, makes sure the pid namespace
// is gone and lets go of init.
func (p *Process) teardown() {
	if p.net != nil {
		p.net.stop()
	}
	p.mu.Lock()
	fd := p.pidfd
	p.mu.Unlock()
	if fd < 0 {
		return
	}
	// With bwrap gone, init has SIGKILL on its way already
	// (--die-with-parent); send it again rather than trust that.
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	// init ends only once every process of its namespace has been
	// killed and reaped.
	awaitExit(fd, teardownTimeout)
	p.mu.Lock()
	_ = unix.Close(fd)
	p.pidfd = -1
	p.mu.Unlock()
}

// abort ends a process whose start failed, before reap runs.
func (p *Process) abort() {
	p.kill()
	<-p.proc.Done()
	p.teardown()
}

// statusOf turns the outer bwrap's status into the program's. bwrap
// exits with the program's code, or 128+n when a signal n killed it; such
// codes are reported as that signal, as a shell would (a program that
// itself exits with 129..192 is reported the same way). A signal that
// killed bwrap itself (Stop's SIGKILL) is reported as is.
func statusOf(st core.ExitStatus) core.ExitStatus {
	if st.Signal == "" && st.Code > 128 && st.Code <= 128+64 {
		st.Signal = procgroup.SignalName(syscall.Signal(st.Code - 128))
	}
	return st
}

// Pid is the outer bwrap's pid, which is also its process group id:
// SIGKILL to that group ends the whole sandbox.
func (p *Process) Pid() int { return p.proc.Pid() }

// Signal sends sig to the program's process group inside the sandbox;
// SIGKILL ends the whole sandbox. It returns os.ErrProcessDone once the
// sandbox is gone, and EInvalid for a signal that is not a syscall.Signal.
func (p *Process) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return core.Errorf(core.EInvalid, "unsupported signal %v", sig)
	}
	select {
	case <-p.Done():
		return os.ErrProcessDone
	default:
	}
	if s == syscall.SIGKILL {
		p.kill()
		return nil
	}
	return p.signalInside(s)
}

// signalInside sends s to init's process group, where the program runs.
func (p *Process) signalInside(s syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pidfd < 0 || exited(p.pidfd) {
		return os.ErrProcessDone
	}
	return procgroup.Signal(p.init, s)
}

// kill ends the sandbox: SIGKILL to the outer bwrap's group and to init.
func (p *Process) kill() {
	_ = p.proc.Signal(syscall.SIGKILL)
	p.mu.Lock()
	if p.pidfd >= 0 {
		_ = unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
	}
	p.mu.Unlock()
}

// Stop sends SIGTERM to the program's group, waits up to grace for it to
// exit, then kills the whole sandbox, and returns the program's status
// once everything is gone. If ctx ends first it returns ctx's error:
// SIGKILL is still sent (early) and reaping still happens in the
// background. Stop is idempotent and safe to call concurrently; later
// calls do not signal again.
func (p *Process) Stop(ctx context.Context, grace time.Duration) (core.ExitStatus, error) {
	if err := p.Escalate(ctx, grace, p.proc.Done(), p.stopSignal); err != nil {
		return core.ExitStatus{}, err
	}
	return p.Wait()
}

// stopSignal is Stop's way to the group: SIGTERM to the program's group,
// where a group already gone is not an error, and SIGKILL to the whole
// sandbox, leftovers that ignored SIGTERM or left its group included.
func (p *Process) stopSignal(s syscall.Signal) error {
	if s == syscall.SIGKILL {
		p.kill()
		return nil
	}
	if err := p.signalInside(s); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
