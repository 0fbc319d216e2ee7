package bwrap

import "golang.org/x/sys/unix"

// auditArch is the architecture seccomp reports for native system calls.
const auditArch = unix.AUDIT_ARCH_X86_64

// modeRules are the system calls that set a file's mode, with the
// argument that holds it.
var modeRules = []modeRule{
	{unix.SYS_CHMOD, 1}, {unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_CREAT, 1}, {unix.SYS_OPEN, 2}, {unix.SYS_OPENAT, 3},
	{unix.SYS_MKNOD, 1}, {unix.SYS_MKNODAT, 2},
}
