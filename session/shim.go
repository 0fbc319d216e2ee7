package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"
)

// ShimOptions say how agents are started in shims (see package shim), so
// that they outlive the daemon.
type ShimOptions struct {
	// Argv runs the berth binary's shim command.
	Argv []string
	// Linger bounds how long a shim whose agent exited waits for a daemon.
	Linger time.Duration
}

// maxSocketPath is the longest Unix socket path Linux takes, less its NUL.
const maxSocketPath = 107

// startAgent starts the agent: in a shim when the manager has them, else
// as the daemon's own child in a sandbox it opens now.
func (rt *runtime) startAgent(ctx context.Context) (berth.Process, *berth.Failure) {
	m := rt.m
	if so := m.opts.Shim; so != nil {
		// Each shim has files of its own: a shim still exiting never
		// removes those of the next one (a quick stop and resume).
		base := filepath.Join(m.opts.RunDir, rt.id+"."+randomHex(4))
		if len(base)+len(".spool") > maxSocketPath {
			return nil, &berth.Failure{Kind: berth.FailStartup, Message: fmt.Sprintf("the shim socket path %s.sock is too long for a Unix socket: use a shorter BERTH_HOME", base)}
		}
		rt.shimSocket = base + ".sock"
		job := shim.Config{SessionID: rt.id, Provider: rt.provider.Name(), Socket: rt.shimSocket, Spool: base + ".spool",
			Sandbox: rt.boxCfg, Command: shim.Command{Path: rt.spec.Command, Args: rt.spec.Args},
			Linger: so.Linger, Base: rt.sess.AgentOffset}
		p, ready, err := shim.Launch(ctx, so.Argv, job, base+".log")
		if err != nil {
			kind := berth.FailStartup
			msg := fmt.Sprintf("start agent %s: %s", rt.spec.Name, berth.ErrorMessage(err))
			if ready.Stage == "sandbox" {
				kind, msg = berth.FailSandbox, berth.ErrorMessage(err)
			}
			return nil, &berth.Failure{Kind: kind, Message: msg}
		}
		rt.shim, rt.boxRef = p, ready.Ref
		return p, nil
	}
	sb, err := rt.provider.Open(ctx, rt.boxCfg)
	if err != nil {
		return nil, &berth.Failure{Kind: berth.FailSandbox, Message: berth.ErrorMessage(err)}
	}
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: rt.spec.Command, Args: rt.spec.Args})
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
	rt.mu.Lock()
	active := rt.shim != nil && rt.sess.State == berth.StateActive && rt.stopReason == "" && !rt.exited
	if active {
		rt.detached.Store(true)
	}
	rt.mu.Unlock()
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
	_ = rt.client.Close()
	rt.mu.Lock()
	// Timers would decide or kill on behalf of a daemon that is gone.
	for _, w := range rt.perms {
		if w.timer.Stop() {
			rt.wg.Done()
		}
	}
	if t := rt.turn; t != nil && t.graceTimer != nil && t.graceTimer.Stop() {
		rt.wg.Done()
	}
	rt.mu.Unlock()
	rt.terminals.closeAll()
	rt.turnWG.Wait()
	rt.wg.Wait()
	rt.waitStderr()
	if rt.root != nil {
		_ = rt.root.Close()
	}
	rt.closeBox(context.Background())
	rt.m.forget(rt)
	close(rt.finished)
}

// removeRunFiles removes what a shim leaves in the run directory once it
// is gone: its socket and spool (the shim removes them itself when it
// exits cleanly) and its log, which is kept when keepLog is set and it
// says something (why a shim failed). base is the socket path without
// ".sock".
func removeRunFiles(base string, keepLog bool) {
	_ = os.Remove(base + ".sock")
	_ = os.Remove(base + ".spool")
	if fi, err := os.Stat(base + ".log"); err == nil && (!keepLog || fi.Size() == 0) {
		_ = os.Remove(base + ".log")
	}
}

// removeSessionRunFiles removes every file of a session's shims.
func (m *Manager) removeSessionRunFiles(id string) {
	if m.opts.RunDir == "" {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(m.opts.RunDir, id+".*"))
	for _, f := range matches {
		_ = os.Remove(f)
	}
}

// runFileSession returns the session a run directory file belongs to:
// files are named <session>.<instance>.<kind>.
func runFileSession(name string) string {
	id, _, _ := strings.Cut(name, ".")
	return id
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
