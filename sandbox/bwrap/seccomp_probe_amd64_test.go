package bwrap

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// archProbes are the probes of calls only amd64 has.
func archProbes() []probe {
	eperm := syscall.EPERM
	return []probe{
		{"iopl", func() error { return sys(unix.SYS_IOPL, 9) }, eperm, true},
		{"ioperm", func() error { return sys(unix.SYS_IOPERM, 0xfffffff0, 0x100, 0) }, eperm, true},
		{"uselib", func() error { return sys(unix.SYS_USELIB, bad) }, eperm, false},
		{"ustat", func() error { return sys(unix.SYS_USTAT, 0, bad) }, eperm, false},
		{"sysfs", func() error { return sys(unix.SYS_SYSFS, 9999, 0, 0) }, eperm, true},
	}
}
