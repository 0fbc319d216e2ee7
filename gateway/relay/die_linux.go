package relay

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// dieOf ends the process by sig as the system's default action does, so
// that whoever waits for the relay sees the agent's signal. signal.Reset
// is not enough for the signals Go's runtime keeps (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGQUIT, SIGABRT...): raised again, they would have it
// print its goroutines and exit 2. The action is set to SIG_DFL below
// the runtime: an all-zero kernel sigaction is SIG_DFL, no flags, no mask,
// whatever the architecture's layout.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	var dfl [4]uint64
	_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	_ = syscall.Kill(os.Getpid(), sig)
}
