package live

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// lifecycle is the live session's life: the agent made its process
// (wire), served (run), and the monitor that alone ends it, tearing all
// down in order; the channels say how far it got. They are made by New
// and closed once each.
type lifecycle struct {
	ls *Session
	// ready is closed once start has set the agent's process and client
	// (or failed to): readers that may run earlier (stop) wait for it.
	ready chan struct{}
	// handshook is closed when start has returned: the session is active
	// or stopped.
	handshook chan struct{}
	// finished is closed once the session is stopped and torn down.
	finished chan struct{}
}

// wire makes the started agent proc the live session's process: its terminals,
// its confined workspace and its ACP client, reading the agent's stdout
// from the stream position opts names. Nothing runs yet (see run).
func (l *lifecycle) wire(proc berth.Process, opts acp.Options) *agentHandler {
	ls := l.ls
	ls.proc = proc
	ls.terminals = newTerminals(ls)
	ls.files.open()
	opts.MaxLineBytes, opts.Logger = ls.h.Limits.MaxLineBytes, ls.logger
	opts.OnSkippedLine, opts.OnOversizedLine = ls.out.skippedLine, ls.out.oversizedLine
	opts.AdmitRequest = ls.out.admitRequest
	handler := &agentHandler{ls: ls}
	ls.client = acp.NewClient(acp.Pipe{R: proc.Stdout(), W: proc.Stdin()}, handler, opts)
	return handler
}

// run starts what serves a wired live session: the stderr reader, the ACP
// client (then the agent's requests redelivered, those a reattached
// session's previous daemon left unanswered) and the monitor, which alone
// finishes the session.
func (l *lifecycle) run(redeliver [][]byte) {
	ls := l.ls
	ls.out.stderrWG.Add(1)
	go ls.out.readStderr(ls.proc.Stderr())
	ls.client.Start()
	for _, line := range redeliver {
		ls.client.Redeliver(line)
	}
	ls.h.Monitors.Add(1)
	go l.monitor()
}

// requestStop records why the session is stopping; the first reason wins,
// and once the agent has exited the monitor's classification stands.
func (l *lifecycle) requestStop(reason berth.StopReason, failure *berth.Failure) {
	ls := l.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.stopReason == "" && !ls.exited {
		ls.stopReason, ls.failure = reason, failure
	}
}

// stopping reports whether a stop was requested.
func (l *lifecycle) stopping() bool {
	ls := l.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.stopReason != ""
}

// transition moves the session to state `to`, writing the store first. It
// refuses moves the state machine does not allow.
func (l *lifecycle) transition(ctx context.Context, to berth.State, mutate func(*berth.Session)) error {
	ls := l.ls
	ls.mu.Lock()
	defer ls.unlock()
	from := ls.sess.State
	if !berth.CanTransition(from, to) {
		return berth.Errorf(berth.EConflict, "session cannot go from %s to %s", from, to)
	}
	return ls.saveLocked(ctx, from, func(s *berth.Session) {
		s.State = to
		if mutate != nil {
			mutate(s)
		}
	})
}

// monitor waits for the agent to exit, tears everything down in order and
// moves the session to stopped. session_stopped is always the last event.
func (l *lifecycle) monitor() {
	ls := l.ls
	defer ls.h.Monitors.Done()
	status, werr := ls.proc.Wait()
	if errors.Is(werr, shim.ErrDetached) || ls.detached.Load() {
		// Even an exit seen while letting go is the next daemon's to
		// record: the shim keeps the agent's last words and its status.
		l.teardownDetached()
		return
	}
	ls.mu.Lock()
	ls.exited = true
	ls.mu.Unlock()
	// Nothing of the agent's process group may outlive it.
	_ = ls.proc.Signal(syscall.SIGKILL)
	if errors.Is(werr, shim.ErrLost) {
		// The shim died without reporting: its agent goes with it.
		shim.KillAgent(ls.proc.Pid(), ls.id)
		ls.logger.Warn("the agent's shim went away")
	}
	// Let the reader drain what the agent wrote before it died.
	select {
	case <-ls.client.Done():
	case <-time.After(2 * time.Second):
	}
	l.drain()

	ls.mu.Lock()
	reason, failure := ls.stopReason, ls.failure
	if reason == "" {
		reason, failure = classifyExit(status, ls.out.stderrTail, ls.sess.State == berth.StateStarting)
	} else if reason == berth.StopStartupFailed && failure != nil && len(ls.out.stderrTail) > 0 {
		// The agent's own words say best why it did not start.
		failure.Message += "\nstderr:\n" + strings.Join(ls.out.stderrTail, "\n")
	}
	ls.mu.Unlock()

	ctx := context.Background()
	// A tree never outlives its root: the children stop first.
	ls.tree.stopChildren(ctx)
	l.finish(ctx, reason, failure)
	ls.tree.childStopped(ctx, reason)
	ls.box.close(ctx)
	if ls.shim != nil {
		// The shim may go: this daemon has the exit.
		ls.shim.Release()
		shim.BundleOf(ls.box.socket, ls.id).Remove(true)
	}
	// Whatever left the agent's process group (setsid, a double fork) and
	// still carries the session's id dies with the session: the host
	// provider has no namespace to do it.
	ls.h.Sweep(ls.id)
	ls.h.Forget(ls)
	close(l.finished)
}

// classifyExit turns an unrequested exit into a stop reason; an agent that
// exits before its handshake completed failed to start.
func classifyExit(st berth.ExitStatus, tail []string, handshaking bool) (berth.StopReason, *berth.Failure) {
	msg := "agent exited with code " + strconv.Itoa(st.Code)
	if st.Signal != "" {
		msg = "agent killed by " + st.Signal
	}
	if handshaking {
		msg = "the agent exited during the handshake: " + msg
	}
	if len(tail) > 0 {
		msg += "\nstderr:\n" + strings.Join(tail, "\n")
	}
	switch {
	case handshaking:
		return berth.StopStartupFailed, &berth.Failure{Kind: berth.FailHandshake, Message: msg}
	case st.Success():
		return berth.StopAgentExited, nil
	case st.Signal == "SIGKILL" && st.OOMKills > 0:
		// Nobody sent it: the kernel did, at the sandbox's memory limit.
		return berth.StopAgentCrashed, &berth.Failure{Kind: berth.FailSandbox,
			Message: "out of memory: the sandbox reached its memory limit (memory_mb) and the kernel killed the agent\n" + msg}
	}
	return berth.StopAgentCrashed, &berth.Failure{Kind: berth.FailProcessExit, Message: msg}
}

// drain closes the connection to the agent and waits for every goroutine
// that serves it. Closing the connection fails the prompt in flight and
// waits for every request handler (fs, terminal, permission); cancel-grace
// timers and terminal waiters may still log events until they return.
func (l *lifecycle) drain() {
	ls := l.ls
	_ = ls.client.Close()
	ls.terminals.closeAll()
	ls.turns.dropWarm()
	ls.turnWG.Wait()
	ls.wg.Wait()
	ls.out.waitStderr()
	ls.files.close()
}

// finish logs session_stopped, committed before anything else is, and
// records the session stopped. Every other producer of the session's
// events has returned by now, so session_stopped is its last event.
func (l *lifecycle) finish(ctx context.Context, reason berth.StopReason, failure *berth.Failure) {
	ls := l.ls
	// The session's berth tools credential dies with it.
	ls.h.RevokeTools(ls.id, true)
	kind := ""
	if failure != nil {
		kind = failure.Kind
	}
	ls.h.Observer.AgentExited(reason, kind)
	// A session that never started still logs what its agent said.
	ls.mu.Lock()
	ls.out.flushEarlyLocked()
	ls.mu.Unlock()
	ev := berth.NewEvent(ls.id, "", berth.EventSessionStopped, map[string]any{"stop_reason": reason, "failure": failure})
	if failure != nil {
		ls.logger.Info("session stopped", "stop_reason", reason, "failure", failure.Kind, "message", failure.Message)
	} else {
		ls.logger.Info("session stopped", "stop_reason", reason)
	}
	// A failed commit is retried: a stream of this session ends only on it.
	for attempt := 0; ; attempt++ {
		_, err := ls.h.Log.AppendSync(ctx, ev)
		if err == nil {
			break
		}
		ls.logger.Error("session_stopped not logged", "err", err, "attempt", attempt+1)
		if attempt == 4 || berth.IsCode(err, berth.EUnavailable) || berth.IsCode(err, berth.ELeaseLost) {
			break
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
	}
	for attempt := 0; ; attempt++ {
		err := l.transition(ctx, berth.StateStopped, func(s *berth.Session) {
			s.StopReason, s.Failure, s.AgentPID = reason, failure, 0
			s.ShimSocket, s.ShimPID = "", 0
			s.ToolsHash = ""
		})
		if err == nil || berth.IsCode(err, berth.EConflict) || berth.IsCode(err, berth.ELeaseLost) || attempt == 4 {
			if err != nil {
				ls.logger.Error("could not record stopped", "err", err)
			}
			if !berth.IsCode(err, berth.ELeaseLost) {
				// Stopped: this node drives the session no more.
				ls.h.ReleaseLease(ctx, ls.id)
			}
			return
		}
		time.Sleep(time.Duration(50<<attempt) * time.Millisecond)
	}
}

// failStart records a session that never got an agent running. It always
// ends the live session, even when the store fails.
func (l *lifecycle) failStart(ctx context.Context, f *berth.Failure) error {
	ls := l.ls
	defer func() {
		ls.h.Forget(ls)
		close(l.ready)
		close(l.finished)
	}()
	l.finish(ctx, berth.StopStartupFailed, f)
	ls.tree.childStopped(ctx, berth.StopStartupFailed)
	return nil
}

// teardownDetached is the monitor's end for a detached live session: every
// goroutine of the live session returns, and the session stays as it is.
func (l *lifecycle) teardownDetached() {
	ls := l.ls
	ls.mu.Lock()
	l.stopTimersLocked()
	ls.mu.Unlock()
	l.drain()
	if !ls.box.shared() {
		// A sandbox of the daemon's own; one reopened from the shim's (a
		// container) holds the agent and stays.
		ls.box.close(context.Background())
	}
	ls.h.Forget(ls)
	close(l.finished)
}

// stopTimersLocked stops the timers that would decide a permission or
// kill the agent on behalf of a daemon that let go of it.
func (l *lifecycle) stopTimersLocked() {
	ls := l.ls
	ls.asks.stopTimersLocked()
	if t := ls.turns.cur; t != nil && t.graceTimer != nil && t.graceTimer.Stop() {
		ls.wg.Done()
		t.graceTimer = nil
	}
}
