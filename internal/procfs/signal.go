package procfs

import (
	"errors"
	"syscall"

	"golang.org/x/sys/unix"
)

// KillIfEnv SIGKILLs process pid, and first its whole process group when
// group is set (never the caller's own), but only if it started with the
// environment entry kv ("KEY=VALUE", whole). It reports whether it sent
// the kill.
//
// A pid read from a file or an earlier scan of /proc may name another
// process by now: its own ended and the number was reused. The process is
// pinned (a pidfd) before its environment is read and killed through that
// pin, so a check that passed is never spent on a stranger. A kernel
// without pidfds (before 5.3, or a seccomp profile refusing them) gets
// the check and a plain kill, moments apart.
func KillIfEnv(pid int, kv string, group bool) bool {
	return SignalIfEnv(pid, kv, syscall.SIGKILL, group)
}

// SignalIfEnv is KillIfEnv with another signal than SIGKILL.
func SignalIfEnv(pid int, kv string, sig syscall.Signal, group bool) bool {
	if pid <= 1 {
		return false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return false
	}
	pinned := err == nil
	if pinned {
		defer unix.Close(fd)
	}
	if !HasEnv(pid, kv) {
		return false
	}
	if group {
		// A live member keeps its group's id from being reused. This
		// process's own group is never one to end.
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid > 1 && pgid != syscall.Getpgrp() && alive(fd, pinned, pid) {
			_ = syscall.Kill(-pgid, sig)
		}
	}
	if pinned {
		return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
	}
	return syscall.Kill(pid, sig) == nil
}

// alive reports whether the process is still the one checked: through the
// pin when there is one.
func alive(fd int, pinned bool, pid int) bool {
	if pinned {
		return unix.PidfdSendSignal(fd, 0, nil, 0) == nil
	}
	return syscall.Kill(pid, 0) == nil
}
