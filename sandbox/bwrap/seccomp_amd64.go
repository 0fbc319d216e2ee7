package bwrap

import "golang.org/x/sys/unix"

// auditArch is the architecture seccomp reports for native system calls.
const auditArch = unix.AUDIT_ARCH_X86_64

// hasX32 says the architecture has the x32 ABI, whose calls carry
// x32SyscallBit under the same auditArch.
const hasX32 = true

// modeRules are the system calls that set a file's mode, with the
// argument that holds it.
var modeRules = []modeRule{
	{unix.SYS_CHMOD, 1}, {unix.SYS_FCHMOD, 1}, {unix.SYS_FCHMODAT, 2}, {unix.SYS_FCHMODAT2, 2},
	{unix.SYS_CREAT, 1}, {unix.SYS_OPEN, 2}, {unix.SYS_OPENAT, 3},
	{unix.SYS_MKNOD, 1}, {unix.SYS_MKNODAT, 2},
}

// deniedArch are the calls refused (EPERM) that only amd64 has: port I/O, the
// obsolete module, sysctl and filesystem-info calls.
var deniedArch = []denied{
	{"iopl", unix.SYS_IOPL}, {"ioperm", unix.SYS_IOPERM},
	{"create_module", unix.SYS_CREATE_MODULE}, {"get_kernel_syms", unix.SYS_GET_KERNEL_SYMS},
	{"query_module", unix.SYS_QUERY_MODULE}, {"uselib", unix.SYS_USELIB}, {"ustat", unix.SYS_USTAT},
	{"sysfs", unix.SYS_SYSFS}, {"_sysctl", unix.SYS__SYSCTL}, {"nfsservctl", unix.SYS_NFSSERVCTL},
}
