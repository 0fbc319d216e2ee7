package bwrap

import "golang.org/x/sys/unix"

// auditArch is the architecture seccomp reports for native system calls.
const auditArch = unix.AUDIT_ARCH_AARCH64

// hasX32 says the architecture has an x32-like ABI: arm64 has none.
const hasX32 = false

// modeRules are the system calls that set a file's mode, with the
// argument that holds it (arm64 has no chmod, creat, open or mknod).
var modeRules = []modeRule{
	{unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_OPENAT, 3}, {unix.SYS_MKNODAT, 2},
}

// deniedArch are the calls refused (EPERM) that only arm64 has: none.
var deniedArch []denied
