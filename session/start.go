package session

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// launching is an agent being started (launch) for start to take over.
type launching struct {
	done chan struct{}
	// base is the stream offset of the agent's first stdout byte.
	base int64
	// proc or fail is set once done is closed.
	proc berth.Process
	fail *berth.Failure
	// toolsHash is the hash of the berth tools credential the agent is
	// given ("" for none), recorded with its pid.
	toolsHash string
}

// launch opens the sandbox and starts the agent in the background, for
// start (or abortLaunch) to wait for: a create runs it while the session
// is stored.
func (rt *runtime) launch(ctx context.Context, provider berth.SandboxProvider) *launching {
	rt.mu.Lock()
	sess := rt.sess
	rt.mu.Unlock()
	rt.provider = provider
	sess.ToolsHash = ""
	st := rt.h.prepare(&sess, rt.spec, provider)
	rt.tools, rt.toolsWarning, rt.boxCfg, rt.program = st.tools, st.toolsWarning, st.box, st.program
	// The agent's stdout continues the session's stream offsets.
	l := &launching{done: make(chan struct{}), base: sess.AgentOffset, toolsHash: sess.ToolsHash}
	go func() {
		defer close(l.done)
		// The agent's home files are fresh copies of the user's at every start.
		if err := rt.h.copyHomeFiles(rt.spec.HomeFiles, rt.boxCfg.Home); err != nil {
			rt.logger.Warn("home_files", "err", err)
		}
		l.proc, l.fail = rt.startAgent(ctx, l.base)
	}()
	return l
}

// abortLaunch ends the agent of a session that could not be stored, and
// its shim: nothing of it was recorded, so nothing else would.
func (rt *runtime) abortLaunch(ctx context.Context, l *launching) {
	if l == nil {
		return
	}
	<-l.done
	if rt.tools != nil {
		rt.h.revokeTools(rt.id, true)
	}
	if l.proc == nil {
		return
	}
	grace := rt.h.limits.StopGrace
	if sp, ok := l.proc.(*shim.Proc); ok {
		sp.Discard()
		if _, err := sp.Stop(ctx, grace); err != nil {
			rt.logger.Warn("stop the agent of a session not stored", "err", err)
		}
		sp.Release()
		shim.BundleOf(rt.shimSocket, rt.id).Remove(false)
		return
	}
	if _, err := l.proc.Stop(ctx, grace); err != nil {
		rt.logger.Warn("stop the agent of a session not stored", "err", err)
	}
	rt.closeBox(ctx)
}

// start takes over the agent l starts and completes the ACP handshake. A
// failure stops the session as startup_failed; it is an error for the
// caller only when nothing could be recorded, or (EInvalid) when the agent
// does not offer an MCP transport the session's servers need. ctx is not
// cancelled (CreateSession detaches it): every path ends in a recorded
// state.
func (rt *runtime) start(ctx context.Context, l *launching) error {
	defer close(rt.handshook)
	h := rt.h
	if h.launcher != nil {
		// The agent is up (or never will be): the next spare shim may
		// take the CPU now, and the next create finds it started.
		defer h.launcher.Replenish()
	}
	<-l.done
	proc, f, base := l.proc, l.fail, l.base
	if rt.toolsWarning != "" {
		// Said now that the session's log has begun.
		rt.mu.Lock()
		rt.emit("", berth.EventRuntimeWarning, map[string]any{"reason": rt.toolsWarning})
		rt.mu.Unlock()
	}
	if f != nil {
		return rt.failStart(ctx, f)
	}
	handler := rt.wire(proc, acp.Options{StartOffset: base})
	// The pid (and the shim) are recorded before anything can stop the
	// session, so a daemon that dies now leaves what the next one needs to
	// reattach, or to kill what is left.
	if err := rt.save(ctx, func(s *berth.Session) {
		s.AgentPID, s.ShimSocket, s.ShimPID = proc.Pid(), "", 0
		s.ToolsHash = l.toolsHash
		if rt.shim != nil {
			s.ShimSocket, s.ShimPID = rt.shimSocket, rt.shim.ShimPID()
		}
	}); err != nil {
		rt.logger.Warn("record agent pid", "err", err)
	}
	rt.run(nil)
	// From here stop() can reach the agent; a stop that came earlier
	// is acted on now, and the handshake below fails fast.
	close(rt.ready)

	hctx, cancel := context.WithTimeout(ctx, h.limits.HandshakeTimeout)
	defer cancel()
	init, err := rt.client.Initialize(hctx, acp.Implementation{Name: "berth", Version: h.version})
	if err != nil {
		return rt.handshakeFailed(ctx, "initialize", err)
	}
	boundInit(&init, rt.logger)
	// What the agent said of itself is kept whatever happens next: a
	// session that fails to start still shows it (CONTRACT §3, issue 16.6).
	rt.mu.Lock()
	rt.sess.ACP.ProtocolVersion, rt.sess.ACP.AgentInfo = init.ProtocolVersion, init.AgentInfo
	rt.sess.ACP.Capabilities, rt.sess.ACP.AuthMethods = init.AgentCapabilities, init.AuthMethods
	rt.mu.Unlock()
	if init.ProtocolVersion != acp.ProtocolVersion {
		return rt.handshakeFailed(ctx, "initialize", fmt.Errorf("agent speaks ACP protocol version %d, berth speaks %d", init.ProtocolVersion, acp.ProtocolVersion))
	}
	rt.mu.Lock()
	servers := rt.sess.MCPServers
	rt.mu.Unlock()
	if err := checkMCPTransports(rt.spec.Name, init.Capabilities().McpCapabilities, servers); err != nil {
		_ = rt.handshakeFailed(ctx, "initialize", err)
		return err
	}
	rt.mu.Lock()
	// The controls the session had before a resume, to set again.
	before := controlsOf(rt.sess.ACP)
	rt.mu.Unlock()
	rt.init, rt.handler = &init, handler
	acpID, resumedBy, setup, err := rt.openACPSession(hctx, &init, handler)
	if isAuthRequired(err) {
		return rt.awaitAuth(ctx, err)
	}
	if err != nil {
		return rt.handshakeFailed(ctx, "session/new", err)
	}
	return rt.activate(ctx, acpID, resumedBy, setup, before)
}

// activate makes a session whose agent opened its conversation (acpID)
// active: the state and session_started are one step.
// setup is the agent's answer to opening it and before the controls the
// session had, set again after a resume.
func (rt *runtime) activate(ctx context.Context, acpID, resumedBy string, setup acp.SessionSetup, before berth.ACPInfo) error {
	init := rt.init
	info := berth.ACPInfo{SessionID: acpID, ProtocolVersion: init.ProtocolVersion,
		AgentInfo: init.AgentInfo, Capabilities: init.AgentCapabilities, AuthMethods: init.AuthMethods}

	// Going active and logging session_started are one step, so neither a
	// stop nor the agent's exit can slip between them.
	rt.mu.Lock()
	if rt.exited || rt.stopReason != "" {
		rt.mu.Unlock()
		// A stop or the agent's exit raced the handshake; the monitor finishes the session.
		<-rt.finished
		return nil
	}
	rt.setACPSession(acpID)
	// What the agent offers: what its updates said so far, then its answer.
	ctl := controlsOf(rt.sess.ACP)
	applySetup(&ctl, setup)
	info = withControls(info, ctl)
	err := rt.saveLocked(ctx, berth.StateStarting, func(s *berth.Session) {
		if rt.awaitingAuth || s.ACP.SessionID == "" {
			// It waited for authentication to start: it has had it.
			s.NeedsAuth = false
		}
		s.State, s.ACP = berth.StateActive, info
	})
	rt.awaitingAuth = false
	if err == nil {
		rt.emit("", berth.EventSessionStarted, map[string]any{
			"agent_info": info.AgentInfo, "protocol_version": info.ProtocolVersion,
			"capabilities": info.Capabilities, "resumed_by": resumedBy})
		rt.emitEarlyLocked()
		rt.logger.Info("session started", "agent", rt.spec.Name, "resumed_by", resumedBy)
		if rt.resumed {
			// Before the queue runs, the session gets its mode and config back.
			rt.mu.Unlock()
			rt.reapplyControls(ctx, before)
			rt.mu.Lock()
		}
		// A resumed session runs what it had queued.
		rt.dispatchLocked(ctx)
	}
	rt.mu.Unlock()
	if err != nil {
		rt.logger.Error("could not record active", "err", err)
		rt.requestStop(berth.StopStartupFailed, &berth.Failure{Kind: berth.FailInternal, Message: "the session could not be recorded active"})
		_, _ = rt.proc.Stop(ctx, rt.h.limits.StopGrace)
		<-rt.finished
	}
	return nil
}

// openACPSession opens the agent's side of the session: a new one, or for
// a resumed session its previous conversation, through session/load or
// else session/resume when the agent offers them. It returns the ACP
// session id and how the conversation was resumed ("" for a new one). A
// conversation the agent cannot reopen becomes a new one whose first
// prompt carries the transcript so far ("transcript"), with a
// runtime_warning when reopening failed.
func (rt *runtime) openACPSession(ctx context.Context, init *acp.InitializeResponse, h *agentHandler) (string, string, acp.SessionSetup, error) {
	prev := rt.resumeFrom
	caps := init.Capabilities()
	mcp := rt.mcpServers()
	if prev == "" && rt.fork != nil {
		// A fork's controls come from the agent's updates.
		id, how, err := rt.openFork(ctx, caps, mcp)
		return id, how, acp.SessionSetup{}, err
	}
	if prev == "" {
		ns, err := rt.client.NewSession(ctx, rt.workspace, mcp)
		return ns.SessionID, "", ns.SessionSetup, err
	}
	var err error
	var setup acp.SessionSetup
	how := ""
	switch {
	case caps.LoadSession:
		// The replayed history is in the log already.
		h.replaying.Store(true)
		how = "load"
		setup, err = rt.client.LoadSessionSetup(ctx, prev, rt.workspace, mcp)
		h.replaying.Store(false)
	case caps.CanResume():
		how = "resume"
		setup, err = rt.client.ResumeSessionSetup(ctx, prev, rt.workspace, mcp)
	}
	if how != "" && err == nil {
		return prev, how, setup, nil
	}
	if err != nil {
		rt.mu.Lock()
		// The start goroutine is not one the monitor waits for: log only while the agent runs.
		if !rt.exited {
			rt.emit("", berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
				"the agent could not reopen the conversation (session/%s: %v): it starts a new one, given the transcript so far", how, err)})
		}
		rt.mu.Unlock()
	}
	ns, err := rt.client.NewSession(ctx, rt.workspace, mcp)
	if err != nil {
		return "", "", acp.SessionSetup{}, err
	}
	carry, terr := rt.h.transcriptPreamble(ctx, rt.id)
	if terr != nil {
		rt.logger.Warn("transcript for the new conversation", "err", terr)
	}
	rt.mu.Lock()
	rt.carry = carry
	rt.mu.Unlock()
	return ns.SessionID, "transcript", ns.SessionSetup, nil
}

// handshakeFailed stops a session whose agent did not complete the
// handshake; the monitor records it as startup_failed with the agent's
// stderr tail.
func (rt *runtime) handshakeFailed(ctx context.Context, step string, err error) error {
	msg := fmt.Sprintf("agent handshake failed at %s: %v", step, err)
	var rpcErr *acp.Error
	if errors.As(err, &rpcErr) && len(rpcErr.Data) > 0 && len(rpcErr.Data) <= 4096 {
		// The error's data is often the real cause.
		msg += " (" + string(rpcErr.Data) + ")"
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("agent did not answer %s within %s", step, rt.h.limits.HandshakeTimeout)
	case errors.Is(err, acp.ErrClosed) || strings.Contains(err.Error(), acp.ErrClosed.Error()):
		msg = fmt.Sprintf("agent exited during the handshake (%s)", step)
	}
	rt.requestStop(berth.StopStartupFailed, &berth.Failure{Kind: berth.FailHandshake, Message: msg})
	_, _ = rt.proc.Stop(ctx, rt.h.limits.StopGrace)
	<-rt.finished
	return nil
}

// failStart records a session that never got an agent running. It always
// ends the runtime, even when the store fails.
func (rt *runtime) failStart(ctx context.Context, f *berth.Failure) error {
	defer func() {
		rt.h.forget(rt)
		close(rt.ready)
		close(rt.finished)
	}()
	rt.finish(ctx, berth.StopStartupFailed, f)
	rt.childStopped(ctx, berth.StopStartupFailed)
	return nil
}

// mcpServers are the MCP servers the agent is given: the session's own,
// then berth's tools when it has them.
func (rt *runtime) mcpServers() []acp.McpServer {
	rt.mu.Lock()
	mcp := acpMCPServers(rt.sess.MCPServers)
	rt.mu.Unlock()
	if rt.tools != nil {
		mcp = append(mcp, *rt.tools)
	}
	return mcp
}
