package bwrap

import "golang.org/x/sys/unix"

// auditArch is the architecture seccomp reports for native system calls.
const auditArch = unix.AUDIT_ARCH_AARCH64

// modeRules are the system calls that set a file's mode, with the
// argument that holds it (arm64 has no chmod, creat, open or mknod).
var modeRules = []modeRule{
	{unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_OPENAT, 3}, {unix.SYS_MKNODAT, 2},
}
