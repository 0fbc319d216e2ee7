//go:build !linux

package relay

import (
	"os"
	"os/signal"
	"syscall"
)

// dieOf raises sig again with Go's own handling reset.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
}
