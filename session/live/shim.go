package live

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// ShimOptions say how agents are started in shims (see package shim), so
// that they outlive the daemon.
type ShimOptions struct {
	// Argv runs the berth binary's shim command, for every provider the
	// Programs before it do not serve (see shim.Launcher); Env is added to
	// the daemon's environment for them.
	Argv     []string
	Programs []shim.Program
	Env      []string
	// Spare is how many idle shims are kept started ahead (default 1; -1
	// for none).
	Spare int
	// Linger bounds how long a shim whose agent exited waits for a daemon.
	Linger time.Duration
	// Orphan bounds how long a shim keeps a live agent with no daemon
	// attached.
	Orphan time.Duration
}

// startAgent starts the agent: in a shim when the manager has them, else
// as the daemon's own child in a sandbox it opens now. base is the stream
// offset of the agent's first stdout byte.
func (ls *Session) startAgent(ctx context.Context, base int64) (berth.Process, *berth.Failure) {
	h := ls.h
	if so := h.Shim; so != nil {
		b := shim.NewBundle(h.RunDir, ls.id, randomHex(4))
		if len(b.Socket) > shim.MaxSocketPath {
			return nil, &berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("the shim socket path %s is too long for a Unix socket: use a shorter BERTH_HOME", b.Socket)}
		}
		ls.shimSocket = b.Socket
		job := shim.Config{SessionID: ls.id, Provider: ls.provider.Name(), Bundle: b, Token: h.ShimToken(ls.id, b.Socket),
			Sandbox: ls.boxCfg, Command: shim.Command{Path: ls.program, Args: ls.spec.Args},
			Linger: so.Linger, Orphan: so.Orphan, Base: base,
			MaxLineBytes: h.Limits.MaxLineBytes, MaxTurnOutput: h.Limits.MaxTurnOutput}
		p, ready, err := h.Launcher.Launch(ctx, job)
		if err != nil {
			kind := berth.FailStartup
			msg := fmt.Sprintf("start agent %s: %s", ls.spec.Name, berth.ErrorMessage(err))
			if ready.Stage == "sandbox" {
				kind, msg = berth.FailSandbox, berth.ErrorMessage(err)
			}
			return nil, &berth.Failure{Kind: kind, Message: msg}
		}
		ls.boxRef = ready.Ref
		// The supervisor may look at the live session already.
		ls.mu.Lock()
		ls.shim = p
		ls.mu.Unlock()
		return p, nil
	}
	sb, err := ls.provider.Open(ctx, ls.boxCfg)
	if err != nil {
		return nil, &berth.Failure{Kind: berth.FailSandbox, Message: berth.ErrorMessage(err)}
	}
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: ls.program, Args: ls.spec.Args})
	if err != nil {
		_ = sb.Close(ctx)
		return nil, &berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("start agent %s: %s", ls.spec.Name, berth.ErrorMessage(err))}
	}
	ls.boxMu.Lock()
	ls.sandbox = sb
	ls.boxMu.Unlock()
	return proc, nil
}

// box returns the sandbox the daemon runs terminals and execs in, opening
// it on first use when the agent runs in a shim: the same container the
// shim made (docker), or a sandbox of the same shape (bwrap, host).
func (ls *Session) box(ctx context.Context) (berth.Sandbox, error) {
	ls.boxMu.Lock()
	defer ls.boxMu.Unlock()
	if ls.sandbox != nil {
		return ls.sandbox, nil
	}
	if ls.boxClosed {
		return nil, berth.Errorf(berth.EConflict, "the session is stopping")
	}
	var sb berth.Sandbox
	var err error
	if r, ok := ls.provider.(berth.SandboxReopener); ok && ls.boxRef != "" {
		sb, err = r.Reopen(ctx, ls.boxCfg, ls.boxRef)
	} else {
		sb, err = ls.provider.Open(ctx, ls.boxCfg)
	}
	if err != nil {
		return nil, err
	}
	ls.sandbox = sb
	return sb, nil
}

// closeBox releases the daemon's sandbox, if it opened one; nothing opens
// it afterwards.
func (ls *Session) closeBox(ctx context.Context) {
	ls.boxMu.Lock()
	sb := ls.sandbox
	ls.boxClosed = true
	ls.boxMu.Unlock()
	if sb == nil {
		return
	}
	if err := sb.Close(ctx); err != nil {
		ls.logger.Warn("sandbox close", "err", err)
	}
}

// Detach lets go of an agent that runs in a shim, leaving it running for
// the next daemon: nothing more is recorded, the turn in flight stays open
// and pending permissions stay pending. It returns once the live session's
// goroutines are done. A live session without a shim, or not active, is stopped.
func (ls *Session) Detach(ctx context.Context) {
	// A permission being recorded is logged before the agent is let go.
	ls.recordMu.Lock()
	ls.mu.Lock()
	active := ls.shim != nil && ls.sess.State == berth.StateActive && ls.stopReason == "" && !ls.exited
	if active {
		// From here nothing reaches the agent and nothing is recorded:
		// timers that would decide or kill for this daemon are stopped.
		ls.detached.Store(true)
		ls.shim.MarkDetached()
		ls.stopTimersLocked()
	}
	ls.mu.Unlock()
	ls.recordMu.Unlock()
	if !active {
		ls.Stop(ctx, berth.StopDaemonShutdown, nil)
		return
	}
	ls.shim.Detach()
	select {
	case <-ls.finished:
	case <-ctx.Done():
	}
}

// teardownDetached is the monitor's end for a detached live session: every
// goroutine of the live session returns, and the session stays as it is.
func (ls *Session) teardownDetached() {
	ls.mu.Lock()
	ls.stopTimersLocked()
	ls.mu.Unlock()
	ls.drain()
	ls.boxMu.Lock()
	shared := ls.boxRef != ""
	ls.boxMu.Unlock()
	if !shared {
		// A sandbox of the daemon's own; one reopened from the shim's (a
		// container) holds the agent and stays.
		ls.closeBox(context.Background())
	}
	ls.h.Forget(ls)
	close(ls.finished)
}

// stopTimersLocked stops the timers that would decide a permission or
// kill the agent on behalf of a daemon that let go of it.
func (ls *Session) stopTimersLocked() {
	for _, w := range ls.perms {
		if w.timer != nil && w.timer.Stop() {
			ls.wg.Done()
			w.timer = nil
		}
	}
	if t := ls.turn; t != nil && t.graceTimer != nil && t.graceTimer.Stop() {
		ls.wg.Done()
		t.graceTimer = nil
	}
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
