package live

import (
	"context"
	"syscall"

	"github.com/berth-sh/berth/shim"
)

// LetGo reports whether the daemon let go of the session (detach, lose).
func (ls *Session) LetGo() bool { return ls.detached.Load() }

// Lose drops a live session whose lease another node holds: from now on it
// records nothing (the store would refuse it anyway), its timers stop,
// its agent's process group is killed, and once the monitor has torn it
// down its shim goes and the log releases the session (its streams here
// go on from the store, which the new owner writes). Idempotent.
func (ls *Session) Lose() {
	ls.mu.Lock()
	first := !ls.detached.Swap(true)
	if first {
		ls.life.stopTimersLocked()
	}
	ls.mu.Unlock()
	if !first {
		<-ls.life.finished
		return
	}
	// An agent still starting is reached once it is started.
	<-ls.life.ready
	if ls.proc != nil {
		if ls.shim != nil {
			ls.shim.Discard()
		}
		_ = ls.proc.Signal(syscall.SIGKILL)
		shim.KillAgent(ls.proc.Pid(), ls.id)
	}
	<-ls.life.finished
	if ls.shim != nil {
		// The shim may go: nobody reattaches this agent.
		ls.shim.Release()
		shim.BundleOf(ls.box.socket, ls.id).Remove(true)
	}
	ls.box.close(context.Background())
	ls.h.RevokeTools(ls.id, true)
	ls.h.Sweep(ls.id)
	// The new owner writes the log from here: this node's streams of the
	// session go on from the store.
	ls.h.Log.Release(ls.id)
}
