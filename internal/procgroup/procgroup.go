// Package procgroup starts processes in process groups of their own and
// stops whole groups: SIGTERM, a grace period, SIGKILL. Signalling the group
// rather than the process reaches the grandchildren an agent leaves behind
// (shells, language servers, `sleep &`), even after the leader has exited.
//
// Reaping stays with the caller (exec.Cmd.Wait): these helpers only signal
// and wait for a channel the caller closes once the leader is reaped.
// Grandchildren orphaned by a killed leader are reparented to PID 1 (or the
// nearest subreaper), which reaps them.
package procgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth/internal/core"
)

// Setpgid makes cmd start as the leader of a new process group whose id is
// its pid. It keeps any other SysProcAttr settings.
func Setpgid(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

// Start starts cmd in a process group of its own. The group id is
// cmd.Process.Pid.
func Start(cmd *exec.Cmd) error {
	Setpgid(cmd)
	return cmd.Start()
}

// Signal sends sig to every process of group pgid. A group with no process
// left is not an error: it returns os.ErrProcessDone.
func Signal(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		// kill(-0) and kill(-1) mean "my group" and "everyone": never.
		return fmt.Errorf("procgroup: refusing to signal process group %d", pgid)
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Alive reports whether group pgid still has a process (zombies included:
// an exited process counts until its parent reaps it).
func Alive(pgid int) bool {
	return pgid > 1 && syscall.Kill(-pgid, 0) == nil
}

// Terminate stops group pgid: SIGTERM to the group, then up to grace for
// exited to close (the caller closes it once the leader is reaped) or ctx to
// end, then SIGKILL to the group, whatever happened to the leader, so that
// children outliving it die too. It returns once SIGKILL is sent; reaping is
// the caller's. Errors other than an already empty group are returned.
func Terminate(ctx context.Context, pgid int, grace time.Duration, exited <-chan struct{}) error {
	return escalate(ctx, grace, exited, func(sig syscall.Signal) error {
		if err := Signal(pgid, sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		return nil
	})
}

// escalate sends SIGTERM through signal, waits up to grace for exited to
// close or ctx to end, then sends SIGKILL. It returns the first error of
// signal, which sends to a whole group and takes an empty one for success.
func escalate(ctx context.Context, grace time.Duration, exited <-chan struct{}, signal func(syscall.Signal) error) error {
	if err := signal(syscall.SIGTERM); err != nil {
		return err
	}
	if grace > 0 {
		t := time.NewTimer(grace)
		select {
		case <-exited:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return signal(syscall.SIGKILL)
}

// ExitStatusOf converts a finished process's state. A normal exit gives its
// code. A death by signal gives Signal = the signal's name ("SIGKILL") and
// Code = 128 + the signal number (137 for SIGKILL), as shells report it, so
// that a non-zero Code always means failure. A nil state (never started)
// gives Code -1.
func ExitStatusOf(ps *os.ProcessState) core.ExitStatus {
	if ps == nil {
		return core.ExitStatus{Code: -1}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return core.ExitStatus{Code: 128 + int(ws.Signal()), Signal: SignalName(ws.Signal())}
	}
	return core.ExitStatus{Code: ps.ExitCode()}
}

// SignalName is sig's conventional name ("SIGTERM"), or "SIG<n>" for a
// number without one.
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("SIG%d", int(sig))
}
