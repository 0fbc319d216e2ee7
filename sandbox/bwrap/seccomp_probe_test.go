//go:build amd64 || arm64

package bwrap

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probe is one system call the seccomp test makes inside a sandbox. The
// arguments are chosen so that, where the kernel allows it, the call
// fails without the filter for another reason than EPERM (a bad pointer,
// a bad flag, no such process) and never changes anything: distinct
// says so, and the control run checks it. want is what the filter makes
// of it.
type probe struct {
	name     string
	call     func() error
	want     syscall.Errno
	distinct bool
}

// bad is an address no program maps.
const bad = uintptr(8)

// sys makes a raw system call and returns its error (nil on success).
func sys(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if e != 0 {
		return e
	}
	return nil
}

// probes are the calls the seccomp test makes.
func probes() []probe {
	eperm := syscall.EPERM
	ps := []probe{
		{"keyctl", func() error { return sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, 0xfffffffd, 0) }, eperm, true},
		{"add_key", func() error { return sys(unix.SYS_ADD_KEY, bad, bad, 0, 0, 0xfffffffd) }, eperm, true},
		{"request_key", func() error { return sys(unix.SYS_REQUEST_KEY, bad, bad, 0, 0) }, eperm, true},
		{"mount", func() error { return sys(unix.SYS_MOUNT, bad, bad, bad, 0, 0) }, eperm, true},
		{"umount2", func() error { return sys(unix.SYS_UMOUNT2, bad, 0xffff) }, eperm, true},
		{"pivot_root", func() error { return sys(unix.SYS_PIVOT_ROOT, bad, bad) }, eperm, false},
		{"chroot", func() error { return sys(unix.SYS_CHROOT, bad) }, eperm, true},
		{"fsopen", func() error { return sys(unix.SYS_FSOPEN, bad, 0xffff) }, eperm, false},
		{"fsconfig", func() error { return sys(unix.SYS_FSCONFIG, ^uintptr(0), 0xffff, 0, 0, 0) }, eperm, true},
		{"fsmount", func() error { return sys(unix.SYS_FSMOUNT, ^uintptr(0), 0xffff, 0) }, eperm, false},
		{"fspick", func() error { return sys(unix.SYS_FSPICK, ^uintptr(0), bad, 0xffff) }, eperm, false},
		{"open_tree", func() error { return sys(unix.SYS_OPEN_TREE, ^uintptr(0), bad, 0xffffff) }, eperm, true},
		{"move_mount", func() error { return sys(unix.SYS_MOVE_MOUNT, ^uintptr(0), bad, ^uintptr(0), bad, 0xffff) }, eperm, false},
		{"mount_setattr", func() error { return sys(unix.SYS_MOUNT_SETATTR, ^uintptr(0), bad, 0xffff, 0, 0) }, eperm, true},
		{"unshare", func() error { return sys(unix.SYS_UNSHARE, 1) }, eperm, true},
		{"setns", func() error { return sys(unix.SYS_SETNS, ^uintptr(0), 0) }, eperm, true},
		{"clone with CLONE_NEWNS", func() error { return sys(unix.SYS_CLONE, unix.CLONE_NEWNS|unix.CLONE_FS) }, eperm, true},
		{"clone3", func() error { return sys(unix.SYS_CLONE3, bad, 0) }, syscall.ENOSYS, true},
		{"bpf", func() error { return sys(unix.SYS_BPF, 9999, 0, 0) }, eperm, true},
		{"perf_event_open", func() error { return sys(unix.SYS_PERF_EVENT_OPEN, bad, 0, ^uintptr(0), ^uintptr(0), 0) }, eperm, true},
		{"userfaultfd", func() error { return sys(unix.SYS_USERFAULTFD, 1|0x100) }, eperm, true},
		{"kexec_load", func() error { return sys(unix.SYS_KEXEC_LOAD, 0, 0, bad, 0) }, eperm, false},
		{"kexec_file_load", func() error { return sys(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, bad, 0) }, eperm, false},
		{"init_module", func() error { return sys(unix.SYS_INIT_MODULE, bad, 0, bad) }, eperm, false},
		{"finit_module", func() error { return sys(unix.SYS_FINIT_MODULE, ^uintptr(0), bad, 0) }, eperm, false},
		{"delete_module", func() error { return sys(unix.SYS_DELETE_MODULE, bad, 0) }, eperm, false},
		{"open_by_handle_at", func() error { return sys(unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), bad, 0) }, eperm, false},
		{"swapon", func() error { return sys(unix.SYS_SWAPON, bad, 0) }, eperm, false},
		{"swapoff", func() error { return sys(unix.SYS_SWAPOFF, bad) }, eperm, false},
		{"reboot", func() error { return sys(unix.SYS_REBOOT, 0, 0, 0, 0) }, eperm, false},
		{"acct", func() error { return sys(unix.SYS_ACCT, bad) }, eperm, false},
		{"settimeofday", func() error { return sys(unix.SYS_SETTIMEOFDAY, bad, 0) }, eperm, true},
		{"clock_settime", func() error { return sys(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, bad) }, eperm, true},
		{"syslog", func() error { return sys(unix.SYS_SYSLOG, 9999, 0, 0) }, eperm, false},
		{"quotactl", func() error { return sys(unix.SYS_QUOTACTL, 0, bad, 0, 0) }, eperm, false},
		{"vhangup", func() error { return sys(unix.SYS_VHANGUP) }, eperm, false},
		{"fanotify_init", func() error { return sys(unix.SYS_FANOTIFY_INIT, 0xffffffff, 0) }, eperm, false},
		{"kcmp", func() error { return sys(unix.SYS_KCMP, 0x7ffffff0, 0x7ffffff0, 9999, 0, 0) }, eperm, true},
		{"lookup_dcookie", func() error { return sys(unix.SYS_LOOKUP_DCOOKIE, 0, bad, 0) }, eperm, false},
		{"ptrace PTRACE_ATTACH", func() error { return sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 0x7ffffff0) }, eperm, true},
		{"ptrace PTRACE_SEIZE", func() error { return sys(unix.SYS_PTRACE, unix.PTRACE_SEIZE, 0x7ffffff0) }, eperm, true},
		{"personality ADDR_NO_RANDOMIZE", func() error { return sys(unix.SYS_PERSONALITY, 0x0040000) }, eperm, true},
	}
	return append(ps, archProbes()...)
}

// allowedProbes are calls the filter must let through, for the control:
// each must succeed.
func allowedProbes() []probe {
	return []probe{
		{"personality query", func() error { return sys(unix.SYS_PERSONALITY, 0xffffffff) }, 0, false},
		{"clone without namespace flags", func() error {
			pid, err := syscall.ForkExec("/.berth/busybox", []string{"busybox", "true"}, &syscall.ProcAttr{})
			if err != nil {
				return err
			}
			var ws syscall.WaitStatus
			_, err = syscall.Wait4(pid, &ws, 0, nil)
			return err
		}, 0, false},
		{"ptrace PTRACE_PEEKDATA of a stranger", func() error {
			// Not an attach: refused by the kernel (ESRCH), not the filter.
			err := sys(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, 0x7ffffff0, uintptr(unsafe.Pointer(new(int))))
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return fmt.Errorf("got %v, want ESRCH", err)
		}, 0, false},
	}
}

// errnoOf is err's errno, 0 for none.
func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// runProbes is the helper's body inside the sandbox: one line per probe,
// "name<TAB>errno number".
func runProbes() {
	for _, p := range append(probes(), allowedProbes()...) {
		err := p.call()
		fmt.Printf("%s\t%d\t%v\n", p.name, errnoOf(err), err)
	}
}
