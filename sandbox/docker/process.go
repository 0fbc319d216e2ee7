package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procgroup"
	"github.com/berth-sh/berth/internal/syncx"
)

// Timeouts of the engine calls a process makes on its own behalf.
const (
	// startTimeout bounds finding the pid of a started exec.
	startTimeout = 30 * time.Second
	// signalTimeout bounds a signal sent through an exec in the container.
	signalTimeout = 10 * time.Second
	// ioDelay bounds the wait, after the stream ends, for the copy of a
	// caller-supplied Stdin (a Read that never returns cannot be stopped).
	ioDelay = 2 * time.Second
	// pollMax caps the interval between exec inspections.
	pollMax = 500 * time.Millisecond
	// engineGiveUp is how long an engine that fails every inspection is
	// asked before the process is declared lost.
	engineGiveUp = time.Minute
)

// Process is one exec in a sandbox's container. It implements
// berth.Process.
//
// Pid is the exec's pid on this host, as the engine reports it
// (ExecInspect): the runtime makes every exec a session and process-group
// leader, so it is also the group's id on the host. With an engine on this
// host (the only kind the provider supports: it bind-mounts host paths)
// that is a real pid, which the daemon may signal.
//
// Signals go to the whole group: with kill(2) on -Pid from the daemon when
// the container's processes are this host's and the daemon may signal
// them (root, or the same uid); otherwise, with an exec of `kill` inside the
// container, as the sandbox's user, on the group's id there (read from
// /proc/<pid>/status NSpid). Stop is SIGTERM, the grace, then SIGKILL.
//
// The process has ended when the engine says so (ExecInspect) after its
// stream ends; the engine has reaped it by then. The engine reports a
// death by signal n only as code 128+n: see statusOf. One that died
// because Close removed the container reads as SIGKILL.
type Process struct {
	// Handle has our ends of the streams (pipes) and is done once the
	// engine says the exec has ended (run).
	*procgroup.Handle
	ended func(berth.ExitStatus, error)

	sb     *Sandbox
	execID string
	pid    int // host pid, also the host process group id
	nspid  int // pid inside the container, 0 when unknown
	conn   client.HijackedResponse

	// outW and errW are where the demultiplexed stream goes.
	outW, errW *outWriter
	// ownOut and ownErr are the write ends of our output pipes.
	ownOut, ownErr *os.File
	// stdinDone is closed when the copy of a caller-supplied Stdin ends;
	// nil when there is none.
	stdinDone chan struct{}

	// gone is set once the group was found empty after the exec ended.
	gone atomic.Bool
	// forceExecSignal makes signals go through an exec even when kill(2)
	// would work (tests).
	forceExecSignal bool
}

var _ berth.Process = (*Process)(nil)

// start creates the exec, attaches to it, waits until the engine gives its
// pid and hands the stream to a goroutine that s.procs counts.
func (s *Sandbox) start(ctx context.Context, spec berth.ProcSpec, dir string) (*Process, error) {
	cli := s.p.cli
	created, err := cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{
		User:         s.who.user(),
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		Env:          environ(s.cfg, spec.Env),
		WorkingDir:   dir,
		Cmd:          append([]string{spec.Path}, spec.Args...),
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
			return nil, berth.WrapError(berth.EUnavailable, err, "docker: the sandbox's container is gone")
		}
		return nil, berth.WrapError(berth.EUnavailable, err, "docker: cannot create the process: %s", reason(ctx, err))
	}
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "docker: cannot start %q: %s", filepath.Base(spec.Path), reason(ctx, err))
	}
	p := &Process{sb: s, execID: created.ID, conn: att.HijackedResponse}
	// From here the process runs, whatever ctx does: find its pid within
	// a bound of our own.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	if err := p.findPid(pctx, spec.Path); err != nil {
		p.conn.Close()
		return nil, err
	}
	if err := p.pipes(spec); err != nil {
		p.conn.Close()
		return nil, berth.WrapError(berth.EInternal, err, "docker: cannot make pipes")
	}
	go p.run()
	return p, nil
}

// findPid polls the exec until the engine reports its pid, or reports
// that it could not start (pid 0, exit code 126 or 127, the reason written
// on the stream). Messages name the program by its base name only.
func (p *Process) findPid(ctx context.Context, path string) error {
	name := filepath.Base(path)
	delay := time.Millisecond
	for {
		info, err := p.sb.p.cli.ExecInspect(ctx, p.execID, client.ExecInspectOptions{})
		if err != nil {
			return berth.WrapError(berth.EUnavailable, err, "docker: cannot start %q: %s", name, reason(ctx, err))
		}
		if info.PID > 0 {
			p.pid = info.PID
			if p.sb.local {
				p.nspid = nsPid(info.PID)
			}
			return nil
		}
		if !info.Running && info.ExitCode != 0 {
			why := startFailure(p.conn)
			return berth.WrapError(berth.EUnavailable, errors.New(why), "docker: cannot start %q: %s", name, strings.ReplaceAll(why, path, name))
		}
		if !syncx.Sleep(ctx, delay) {
			return berth.WrapError(berth.EUnavailable, ctx.Err(), "docker: cannot start %q: the engine gave no pid", name)
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// startFailure reads the runtime's reason from the stream of an exec that
// did not start, and keeps its useful part: `exec: "x": executable file not
// found in $PATH`.
func startFailure(conn client.HijackedResponse) string {
	_ = conn.Conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&limitWriter{w: &out, n: 4096}, &limitWriter{w: &out, n: 4096}, conn.Reader)
	msg := strings.TrimSpace(out.String())
	if i := strings.Index(msg, "exec: "); i >= 0 {
		msg = msg[i+len("exec: "):]
	}
	msg = strings.TrimSuffix(msg, ": unknown")
	if msg == "" {
		msg = "the runtime refused to start it"
	}
	return msg
}

// nsPid is the innermost pid of host pid (its pid inside the container),
// from /proc/<pid>/status; 0 when it cannot be read.
func nsPid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}

// pipes sets up the process's standard streams, and its Handle with our
// ends of them: the caller's readers and writers where ProcSpec has them,
// else a stdin writer on the stream and pipes for stdout and stderr.
func (p *Process) pipes(spec berth.ProcSpec) error {
	var stdout, stderr io.ReadCloser
	if spec.Stdout == nil || spec.Stderr == nil {
		// Make both pipes first, so a failure leaks nothing.
		var files []*os.File
		newPipe := func() (r, w *os.File, err error) {
			if r, w, err = os.Pipe(); err == nil {
				files = append(files, r, w)
			}
			return r, w, err
		}
		if spec.Stdout == nil {
			r, w, err := newPipe()
			if err != nil {
				return err
			}
			stdout, p.ownOut = procgroup.NewPipeReader(r), w
		}
		if spec.Stderr == nil {
			r, w, err := newPipe()
			if err != nil {
				for _, f := range files {
					_ = f.Close()
				}
				return err
			}
			stderr, p.ownErr = procgroup.NewPipeReader(r), w
		}
	}
	p.outW = &outWriter{w: spec.Stdout}
	if p.ownOut != nil {
		p.outW = &outWriter{w: p.ownOut, own: true}
	}
	p.errW = &outWriter{w: spec.Stderr}
	if p.ownErr != nil {
		p.errW = &outWriter{w: p.ownErr, own: true}
	}
	var stdin io.WriteCloser
	if spec.Stdin == nil {
		stdin = &stdinWriter{conn: p.conn}
	} else {
		p.stdinDone = make(chan struct{})
		go func() {
			defer close(p.stdinDone)
			_, _ = io.Copy(p.conn.Conn, spec.Stdin)
			_ = p.conn.CloseWrite()
		}()
	}
	p.Handle, p.ended = procgroup.NewHandle(stdin, stdout, stderr)
	return nil
}

// run demultiplexes the stream into stdout and stderr until it ends, then
// asks the engine how the process ended and wakes the waiters.
func (p *Process) run() {
	defer p.sb.procs.Done()
	_, copyErr := stdcopy.StdCopy(p.outW, p.errW, p.conn.Reader)
	closeQuietly(p.ownOut)
	closeQuietly(p.ownErr)
	if p.stdinDone != nil {
		t := time.NewTimer(ioDelay)
		select {
		case <-p.stdinDone:
		case <-t.C:
		}
		t.Stop()
	}
	p.conn.Close()
	if p.Stdin() != nil {
		_ = p.Stdin().Close()
	}
	status, err := p.exitStatus()
	if err == nil {
		err = errors.Join(p.outW.err, p.errW.err)
		if copyErr != nil && !p.sb.isClosing() && !isClosedConn(copyErr) {
			err = errors.Join(err, fmt.Errorf("docker: output stream: %w", copyErr))
		}
	}
	if !p.groupAlive() {
		p.gone.Store(true)
	}
	p.ended(status, err)
}

// exitStatus polls the engine until the exec is no longer running. A
// process whose container was removed by Close died of SIGKILL.
func (p *Process) exitStatus() (berth.ExitStatus, error) {
	ctx := context.Background()
	delay := time.Millisecond
	var failingSince time.Time
	for {
		info, err := p.sb.p.cli.ExecInspect(ctx, p.execID, client.ExecInspectOptions{})
		switch {
		case err != nil && p.sb.isClosing():
			return berth.ExitStatus{Code: 128 + int(syscall.SIGKILL), Signal: "SIGKILL"}, nil
		case err != nil && cerrdefs.IsNotFound(err):
			return berth.ExitStatus{Code: -1}, berth.WrapError(berth.EUnavailable, err, "docker: the process's container is gone")
		case err != nil && !failingSince.IsZero() && time.Since(failingSince) > engineGiveUp:
			return berth.ExitStatus{Code: -1}, berth.WrapError(berth.EUnavailable, err, "docker: the engine stopped answering about the process")
		case err != nil:
			// The engine may be restarting: keep asking, more slowly.
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			delay = pollMax
		case !info.Running:
			return p.statusOf(info.ExitCode), nil
		default:
			failingSince = time.Time{}
		}
		time.Sleep(delay)
		delay = min(2*delay, pollMax)
	}
}

// statusOf turns an engine exit code into an ExitStatus. The engine
// reports a death by signal n as code 128+n, as shells do, and nothing
// more: so every code from 129 to 192 is read as that signal, and a
// process that exits 137 of its own will reads as killed by SIGKILL.
func (p *Process) statusOf(code int) berth.ExitStatus {
	if n := code - 128; n > 0 && n <= 64 {
		return berth.ExitStatus{Code: code, Signal: procgroup.SignalName(syscall.Signal(n))}
	}
	return berth.ExitStatus{Code: code}
}

// groupAlive reports whether the process group still has a member, as far
// as this host can tell (EPERM means someone is there).
func (p *Process) groupAlive() bool {
	if !p.sb.local || p.pid <= 1 {
		return false
	}
	err := syscall.Kill(-p.pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Pid is the exec's pid on the host, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// Signal sends sig to the process's whole group, leftovers of an exited
// leader included. os.ErrProcessDone when the group is empty; EInvalid for
// a signal that is not a syscall.Signal; EUnavailable when the group can be
// reached neither from this host nor from inside the container.
func (p *Process) Signal(sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok || s <= 0 || s >= 64 {
		return berth.Errorf(berth.EInvalid, "docker: unsupported signal %v", sig)
	}
	if p.gone.Load() {
		return os.ErrProcessDone
	}
	return p.signal(s)
}

// signal delivers s to the group: kill(2) from the host when it can, else
// through an exec in the container.
func (p *Process) signal(s syscall.Signal) error {
	if p.sb.local && !p.forceExecSignal {
		err := procgroup.Signal(p.pid, s)
		if !errors.Is(err, syscall.EPERM) {
			return err
		}
	}
	if p.nspid <= 1 {
		return berth.Errorf(berth.EUnavailable, "docker: cannot signal the process: the engine's processes are not visible from this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), signalTimeout)
	defer cancel()
	return p.sb.kill(ctx, s, p.nspid)
}

// Stop sends SIGTERM to the group, waits up to grace for the process to
// end, then SIGKILLs the group whether or not the leader is still there,
// and returns the status once the engine has it. If ctx ends first it
// returns ctx's error: SIGKILL is still sent (early). Stop is idempotent
// and safe to call concurrently; later calls do not signal again.
func (p *Process) Stop(ctx context.Context, grace time.Duration) (berth.ExitStatus, error) {
	if err := p.Escalate(ctx, grace, p.Done(), p.stopSignal); err != nil {
		return berth.ExitStatus{}, err
	}
	return p.Wait()
}

// stopSignal signals the group for Stop: an empty group, or a process
// whose group is already gone, is not an error.
func (p *Process) stopSignal(s syscall.Signal) error {
	if p.gone.Load() {
		return nil
	}
	select {
	case <-p.Done():
		if !p.groupAlive() {
			return nil
		}
	default:
	}
	if err := p.signal(s); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// kill sends s to process group pgid inside the container with an exec of
// kill, as the sandbox's user (the only user whose processes it may
// signal). os.ErrProcessDone when the group is empty.
func (s *Sandbox) kill(ctx context.Context, sig syscall.Signal, pgid int) error {
	name := strings.TrimPrefix(procgroup.SignalName(sig), "SIG")
	if sig == 0 {
		name = "0"
	}
	cmd := []string{"/bin/sh", "-c", `kill -s "$0" -- "-$1" 2>&1 || kill -s "$0" "-$1"`, name, strconv.Itoa(pgid)}
	if s.p.helper() != "" {
		cmd = []string{HelperPath, "kill", "-s", name, "-" + strconv.Itoa(pgid)}
	}
	created, err := s.p.cli.ExecCreate(ctx, s.id, client.ExecCreateOptions{User: s.who.user(), AttachStdout: true, AttachStderr: true, Cmd: cmd})
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "docker: cannot signal the process: %s", reason(ctx, err))
	}
	att, err := s.p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "docker: cannot signal the process: %s", reason(ctx, err))
	}
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&limitWriter{w: &out, n: 4096}, &limitWriter{w: &out, n: 4096}, att.Reader)
	att.Close()
	for {
		info, err := s.p.cli.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return berth.WrapError(berth.EUnavailable, err, "docker: cannot signal the process: %s", reason(ctx, err))
		}
		if !info.Running {
			switch {
			case info.ExitCode == 0:
				return nil
			case strings.Contains(strings.ToLower(out.String()), "no such process"):
				return os.ErrProcessDone
			default:
				return berth.Errorf(berth.EUnavailable, "docker: cannot signal the process: kill exited %d: %s", info.ExitCode, strings.TrimSpace(out.String()))
			}
		}
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return berth.WrapError(berth.EUnavailable, ctx.Err(), "docker: cannot signal the process: no answer in time")
		}
	}
}
