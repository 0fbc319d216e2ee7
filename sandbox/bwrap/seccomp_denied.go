//go:build amd64 || arm64

package bwrap

import "golang.org/x/sys/unix"

// deniedCommon are the system calls that fail with EPERM in every
// sandbox, on every architecture: what Docker's default profile refuses
// to a container without capabilities that reaches the kernel's less
// travelled code (keyrings, mounts, namespaces, BPF, perf, userfaultfd,
// modules, kexec, file handles, swap, reboot, the clock, accounting,
// quotas, syslog). What Docker lets such a container do (adjtimex and
// clock_adjtime queries, name_to_handle_at, modify_ldt) stays allowed.
// bwrap itself makes the sandbox's namespaces and mounts before the
// filter is loaded: nothing in the sandbox needs them.
var deniedCommon = []denied{
	{"keyctl", unix.SYS_KEYCTL}, {"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY},
	{"mount", unix.SYS_MOUNT}, {"umount2", unix.SYS_UMOUNT2}, {"pivot_root", unix.SYS_PIVOT_ROOT},
	{"chroot", unix.SYS_CHROOT},
	{"fsopen", unix.SYS_FSOPEN}, {"fsconfig", unix.SYS_FSCONFIG}, {"fsmount", unix.SYS_FSMOUNT},
	{"fspick", unix.SYS_FSPICK}, {"open_tree", unix.SYS_OPEN_TREE}, {"move_mount", unix.SYS_MOVE_MOUNT},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR},
	{"unshare", unix.SYS_UNSHARE}, {"setns", unix.SYS_SETNS},
	{"bpf", unix.SYS_BPF}, {"perf_event_open", unix.SYS_PERF_EVENT_OPEN}, {"userfaultfd", unix.SYS_USERFAULTFD},
	{"kexec_load", unix.SYS_KEXEC_LOAD}, {"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"init_module", unix.SYS_INIT_MODULE}, {"finit_module", unix.SYS_FINIT_MODULE}, {"delete_module", unix.SYS_DELETE_MODULE},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT},
	{"swapon", unix.SYS_SWAPON}, {"swapoff", unix.SYS_SWAPOFF}, {"reboot", unix.SYS_REBOOT},
	{"acct", unix.SYS_ACCT}, {"settimeofday", unix.SYS_SETTIMEOFDAY}, {"clock_settime", unix.SYS_CLOCK_SETTIME},
	{"syslog", unix.SYS_SYSLOG}, {"quotactl", unix.SYS_QUOTACTL}, {"vhangup", unix.SYS_VHANGUP},
	{"fanotify_init", unix.SYS_FANOTIFY_INIT}, {"kcmp", unix.SYS_KCMP}, {"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE},
}
