package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
func (rt *runtime) startAgent(ctx context.Context, base int64) (berth.Process, *berth.Failure) {
	h := rt.h
	if so := h.shimOpts; so != nil {
		b := shim.NewBundle(h.runDir, rt.id, randomHex(4))
		if len(b.Socket) > shim.MaxSocketPath {
			return nil, &berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("the shim socket path %s is too long for a Unix socket: use a shorter BERTH_HOME", b.Socket)}
		}
		rt.shimSocket = b.Socket
		job := shim.Config{SessionID: rt.id, Provider: rt.provider.Name(), Bundle: b, Token: h.shimToken(rt.id, b.Socket),
			Sandbox: rt.boxCfg, Command: shim.Command{Path: rt.program, Args: rt.spec.Args},
			Linger: so.Linger, Orphan: so.Orphan, Base: base,
			MaxLineBytes: h.limits.MaxLineBytes, MaxTurnOutput: h.limits.MaxTurnOutput}
		p, ready, err := h.launcher.Launch(ctx, job)
		if err != nil {
			kind := berth.FailStartup
			msg := fmt.Sprintf("start agent %s: %s", rt.spec.Name, berth.ErrorMessage(err))
			if ready.Stage == "sandbox" {
				kind, msg = berth.FailSandbox, berth.ErrorMessage(err)
			}
			return nil, &berth.Failure{Kind: kind, Message: msg}
		}
		rt.boxRef = ready.Ref
		// The supervisor may look at the runtime already.
		rt.mu.Lock()
		rt.shim = p
		rt.mu.Unlock()
		return p, nil
	}
	sb, err := rt.provider.Open(ctx, rt.boxCfg)
	if err != nil {
		return nil, &berth.Failure{Kind: berth.FailSandbox, Message: berth.ErrorMessage(err)}
	}
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: rt.program, Args: rt.spec.Args})
	if err != nil {
		_ = sb.Close(ctx)
		return nil, &berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("start agent %s: %s", rt.spec.Name, berth.ErrorMessage(err))}
	}
	rt.boxMu.Lock()
	rt.sandbox = sb
	rt.boxMu.Unlock()
	return proc, nil
}

// box returns the sandbox the daemon runs terminals and execs in, opening
// it on first use when the agent runs in a shim: the same container the
// shim made (docker), or a sandbox of the same shape (bwrap, host).
func (rt *runtime) box(ctx context.Context) (berth.Sandbox, error) {
	rt.boxMu.Lock()
	defer rt.boxMu.Unlock()
	if rt.sandbox != nil {
		return rt.sandbox, nil
	}
	if rt.boxClosed {
		return nil, berth.Errorf(berth.EConflict, "the session is stopping")
	}
	var sb berth.Sandbox
	var err error
	if r, ok := rt.provider.(berth.SandboxReopener); ok && rt.boxRef != "" {
		sb, err = r.Reopen(ctx, rt.boxCfg, rt.boxRef)
	} else {
		sb, err = rt.provider.Open(ctx, rt.boxCfg)
	}
	if err != nil {
		return nil, err
	}
	rt.sandbox = sb
	return sb, nil
}

// closeBox releases the daemon's sandbox, if it opened one; nothing opens
// it afterwards.
func (rt *runtime) closeBox(ctx context.Context) {
	rt.boxMu.Lock()
	sb := rt.sandbox
	rt.boxClosed = true
	rt.boxMu.Unlock()
	if sb == nil {
		return
	}
	if err := sb.Close(ctx); err != nil {
		rt.logger.Warn("sandbox close", "err", err)
	}
}

// detach lets go of an agent that runs in a shim, leaving it running for
// the next daemon: nothing more is recorded, the turn in flight stays open
// and pending permissions stay pending. It returns once the runtime's
// goroutines are done. A runtime without a shim, or not active, is stopped.
func (rt *runtime) detach(ctx context.Context) {
	// A permission being recorded is logged before the agent is let go.
	rt.recordMu.Lock()
	rt.mu.Lock()
	active := rt.shim != nil && rt.sess.State == berth.StateActive && rt.stopReason == "" && !rt.exited
	if active {
		// From here nothing reaches the agent and nothing is recorded:
		// timers that would decide or kill for this daemon are stopped.
		rt.detached.Store(true)
		rt.shim.MarkDetached()
		rt.stopTimersLocked()
	}
	rt.mu.Unlock()
	rt.recordMu.Unlock()
	if !active {
		rt.stop(ctx, berth.StopDaemonShutdown, nil)
		return
	}
	rt.shim.Detach()
	select {
	case <-rt.finished:
	case <-ctx.Done():
	}
}

// teardownDetached is the monitor's end for a detached runtime: every
// goroutine of the runtime returns, and the session stays as it is.
func (rt *runtime) teardownDetached() {
	rt.mu.Lock()
	rt.stopTimersLocked()
	rt.mu.Unlock()
	rt.drain()
	rt.boxMu.Lock()
	shared := rt.boxRef != ""
	rt.boxMu.Unlock()
	if !shared {
		// A sandbox of the daemon's own; one reopened from the shim's (a
		// container) holds the agent and stays.
		rt.closeBox(context.Background())
	}
	rt.h.forget(rt)
	close(rt.finished)
}

// stopTimersLocked stops the timers that would decide a permission or
// kill the agent on behalf of a daemon that let go of it.
func (rt *runtime) stopTimersLocked() {
	for _, w := range rt.perms {
		if w.timer != nil && w.timer.Stop() {
			rt.wg.Done()
			w.timer = nil
		}
	}
	if t := rt.turn; t != nil && t.graceTimer != nil && t.graceTimer.Stop() {
		rt.wg.Done()
		t.graceTimer = nil
	}
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// shimKeyFile holds the secret the tokens of this home's shims are made
// from, in the home (no sandbox sees it).
const shimKeyFile = "shim-key"

// loadShimKey reads the home's shim key, making it the first time (32
// random bytes, mode 0600).
func loadShimKey(home string) ([]byte, error) {
	path := filepath.Join(home, shimKeyFile)
	key, err := os.ReadFile(path)
	if err == nil && len(key) == 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// Written whole or not at all: a short key is made again.
	tmp := path + "-new"
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return nil, err
	}
	return key, nil
}

// shimToken is the token that signs the reports of session id's shim on
// socket (see shim.Report): 128 bits no agent can know, the same for a
// daemon that restarts (made from the home's shim key), another for each
// shim.
func (m *Manager) shimToken(id, socket string) string {
	if len(m.shimKey) == 0 || socket == "" {
		return ""
	}
	mac := hmac.New(sha256.New, m.shimKey)
	mac.Write([]byte(id + "\x00" + socket))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}
