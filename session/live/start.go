package live

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// Launching is an agent being started (launch) for start to take over.
type Launching struct {
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

// Launch opens the sandbox and starts the agent in the background, for
// start (or abortLaunch) to wait for: a create runs it while the session
// is stored.
func (ls *Session) Launch(ctx context.Context, provider berth.SandboxProvider) *Launching {
	ls.mu.Lock()
	sess := ls.sess
	ls.mu.Unlock()
	ls.box.provider = provider
	sess.ToolsHash = ""
	st := ls.h.Prepare(&sess, ls.spec, provider)
	ls.conv.tools, ls.conv.toolsWarning, ls.box.cfg, ls.box.program = st.Tools, st.ToolsWarning, st.Box, st.Program
	// The agent's stdout continues the session's stream offsets.
	l := &Launching{done: make(chan struct{}), base: sess.AgentOffset, toolsHash: sess.ToolsHash}
	go func() {
		defer close(l.done)
		// The agent's home files are fresh copies of the user's at every start.
		if err := ls.h.CopyHomeFiles(ls.spec.HomeFiles, ls.box.cfg.Home); err != nil {
			ls.logger.Warn("home_files", "err", err)
		}
		l.proc, l.fail = ls.box.start(ctx, l.base)
	}()
	return l
}

// AbortLaunch ends the agent of a session that could not be stored, and
// its shim: nothing of it was recorded, so nothing else would.
func (ls *Session) AbortLaunch(ctx context.Context, l *Launching) {
	if l == nil {
		return
	}
	<-l.done
	if ls.conv.tools != nil {
		ls.h.RevokeTools(ls.id, true)
	}
	if l.proc == nil {
		return
	}
	grace := ls.h.Limits.StopGrace
	if sp, ok := l.proc.(*shim.Proc); ok {
		sp.Discard()
		if _, err := sp.Stop(ctx, grace); err != nil {
			ls.logger.Warn("stop the agent of a session not stored", "err", err)
		}
		sp.Release()
		shim.BundleOf(ls.box.socket, ls.id).Remove(false)
		return
	}
	if _, err := l.proc.Stop(ctx, grace); err != nil {
		ls.logger.Warn("stop the agent of a session not stored", "err", err)
	}
	ls.box.close(ctx)
}

// Start takes over the agent l starts and completes the ACP handshake. A
// failure stops the session as startup_failed; it is an error for the
// caller only when nothing could be recorded, or (EInvalid) when the agent
// does not offer an MCP transport the session's servers need. ctx is not
// cancelled (CreateSession detaches it): every path ends in a recorded
// state.
func (ls *Session) Start(ctx context.Context, l *Launching) error {
	defer ls.tellLeaseLost()
	defer close(ls.life.handshook)
	h := ls.h
	if h.Launcher != nil {
		// The agent is up (or never will be): the next spare shim may
		// take the CPU now, and the next create finds it started.
		defer h.Launcher.Replenish()
	}
	<-l.done
	proc, f, base := l.proc, l.fail, l.base
	if ls.conv.toolsWarning != "" {
		// Said now that the session's log has begun.
		ls.mu.Lock()
		ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": ls.conv.toolsWarning})
		ls.mu.Unlock()
	}
	if f != nil {
		return ls.life.failStart(ctx, f)
	}
	handler := ls.life.wire(proc, acp.Options{StartOffset: base})
	// The pid (and the shim) are recorded before anything can stop the
	// session, so a daemon that dies now leaves what the next one needs to
	// reattach, or to kill what is left.
	if err := ls.save(ctx, func(s *berth.Session) {
		s.AgentPID, s.ShimSocket, s.ShimPID = proc.Pid(), "", 0
		s.ToolsHash = l.toolsHash
		if ls.shim != nil {
			s.ShimSocket, s.ShimPID = ls.box.socket, ls.shim.ShimPID()
		}
	}); err != nil {
		ls.logger.Warn("record agent pid", "err", err)
	}
	ls.life.run(nil)
	// From here stop() can reach the agent; a stop that came earlier
	// is acted on now, and the handshake below fails fast.
	close(ls.life.ready)

	hctx, cancel := context.WithTimeout(ctx, h.Limits.HandshakeTimeout)
	defer cancel()
	init, err := ls.client.Initialize(hctx, acp.Implementation{Name: "berth", Version: h.Version})
	if err != nil {
		return ls.conv.handshakeFailed(ctx, "initialize", err)
	}
	boundInit(&init, ls.logger)
	// What the agent said of itself is kept whatever happens next: a
	// session that fails to start still shows it (docs/api.md, Sessions: states, badges, stop reasons).
	ls.mu.Lock()
	ls.sess.ACP.ProtocolVersion, ls.sess.ACP.AgentInfo = init.ProtocolVersion, init.AgentInfo
	ls.sess.ACP.Capabilities, ls.sess.ACP.AuthMethods = init.AgentCapabilities, init.AuthMethods
	ls.mu.Unlock()
	if init.ProtocolVersion != acp.ProtocolVersion {
		return ls.conv.handshakeFailed(ctx, "initialize", fmt.Errorf("agent speaks ACP protocol version %d, berth speaks %d", init.ProtocolVersion, acp.ProtocolVersion))
	}
	ls.mu.Lock()
	servers := ls.sess.MCPServers
	ls.mu.Unlock()
	if err := checkMCPTransports(ls.spec.Name, init.Capabilities().McpCapabilities, servers); err != nil {
		_ = ls.conv.handshakeFailed(ctx, "initialize", err)
		return err
	}
	ls.mu.Lock()
	// The controls the session had before a resume, to set again.
	before := controlsOf(ls.sess.ACP)
	ls.mu.Unlock()
	ls.conv.init, ls.conv.handler = &init, handler
	o, err := ls.conv.open(hctx, &init, handler)
	if isAuthRequired(err) {
		return ls.conv.awaitAuth(ctx, err)
	}
	if err != nil {
		return ls.conv.handshakeFailed(ctx, "session/new", err)
	}
	transcript := ""
	if o.carry {
		transcript = ls.conv.readTranscript(ctx)
	}
	return ls.conv.activate(ctx, o, transcript, before)
}

// opened is the agent's conversation as openACPSession opened it.
type opened struct {
	id string
	// how is how it was reopened (load, resume, fork, transcript), "" for
	// a new one; setup is the agent's answer.
	how   string
	setup acp.SessionSetup
	// carry says the agent could not reopen it: the new one's first
	// prompt carries the transcript so far.
	carry bool
}

// ToolsServer is the berth entry of the agent's MCP servers, with its
// socket and credential (nil when it has no berth tools).
func (ls *Session) ToolsServer() *acp.McpServer { return ls.conv.tools }

// open opens the agent's side of the session: a new one, or for
// a resumed session its previous conversation, through session/load or
// else session/resume when the agent offers them. A conversation the
// agent cannot reopen becomes a new one whose first prompt carries the
// transcript so far (carry), with a runtime_warning when reopening failed.
func (c *conversation) open(ctx context.Context, init *acp.InitializeResponse, h *agentHandler) (opened, error) {
	ls := c.ls
	prev := c.resumeFrom
	caps := init.Capabilities()
	mcp := c.mcpServers()
	if prev == "" && c.fork != nil {
		// A fork's controls come from the agent's updates.
		id, how, err := c.openFork(ctx, caps, mcp)
		return opened{id: id, how: how}, err
	}
	if prev == "" {
		ns, err := ls.client.NewSession(ctx, ls.workspace, mcp)
		return opened{id: ns.SessionID, setup: ns.SessionSetup}, err
	}
	var err error
	var setup acp.SessionSetup
	how := ""
	switch {
	case caps.LoadSession:
		// The replayed history is in the log already.
		h.replaying.Store(true)
		how = "load"
		setup, err = ls.client.LoadSessionSetup(ctx, prev, ls.workspace, mcp)
		h.replaying.Store(false)
	case caps.CanResume():
		how = "resume"
		setup, err = ls.client.ResumeSessionSetup(ctx, prev, ls.workspace, mcp)
	}
	if how != "" && err == nil {
		return opened{id: prev, how: how, setup: setup}, nil
	}
	if err != nil {
		ls.mu.Lock()
		// The start goroutine is not one the monitor waits for: log only while the agent runs.
		if !ls.exited {
			ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
				"the agent could not reopen the conversation (session/%s: %v): it starts a new one, given the transcript so far", how, err)})
		}
		ls.mu.Unlock()
	}
	ns, err := ls.client.NewSession(ctx, ls.workspace, mcp)
	if err != nil {
		return opened{}, err
	}
	return opened{id: ns.SessionID, how: "transcript", setup: ns.SessionSetup, carry: true}, nil
}

// readTranscript is the transcript of the session so far, rendered for an
// agent that could not reopen its conversation; "" when it cannot be read.
// The manager reads it (a callback): no lock is held.
func (c *conversation) readTranscript(ctx context.Context) string {
	ls := c.ls
	carry, err := ls.h.TranscriptPreamble(ctx, ls.id)
	if err != nil {
		ls.logger.Warn("transcript for the new conversation", "err", err)
	}
	return carry
}

// activate makes a session whose agent opened its conversation (o) active:
// the state and session_started are one step. transcript is what the
// first prompt of a conversation the agent could not reopen carries, and
// before the controls the session had, set again after a resume. The
// caller tells of a lease lost (tellLeaseLost): it may hold authMu.
func (c *conversation) activate(ctx context.Context, o opened, transcript string, before berth.ACPInfo) error {
	ls := c.ls
	init := c.init
	acpID, resumedBy := o.id, o.how
	info := berth.ACPInfo{SessionID: acpID, ProtocolVersion: init.ProtocolVersion,
		AgentInfo: init.AgentInfo, Capabilities: init.AgentCapabilities, AuthMethods: init.AuthMethods}

	// Going active and logging session_started are one step, so neither a
	// stop nor the agent's exit can slip between them.
	ls.mu.Lock()
	if ls.exited || ls.stopReason != "" {
		ls.mu.Unlock()
		// A stop or the agent's exit raced the handshake; the monitor finishes the session.
		<-ls.life.finished
		return nil
	}
	c.setID(acpID)
	// What the agent offers: what its updates said so far, then its answer.
	if o.carry {
		c.carry = transcript
	}
	ctl := controlsOf(ls.sess.ACP)
	applySetup(&ctl, o.setup)
	info = withControls(info, ctl)
	err := ls.saveLocked(ctx, berth.StateStarting, func(s *berth.Session) {
		if c.awaitingAuth || s.ACP.SessionID == "" {
			// It waited for authentication to start: it has had it.
			s.NeedsAuth = false
		}
		s.State, s.ACP = berth.StateActive, info
	})
	c.awaitingAuth = false
	if err == nil {
		ls.Emit("", berth.EventSessionStarted, map[string]any{
			"agent_info": info.AgentInfo, "protocol_version": info.ProtocolVersion,
			"capabilities": info.Capabilities, "resumed_by": resumedBy})
		ls.out.flushEarlyLocked()
		ls.logger.Info("session started", "agent", ls.spec.Name, "resumed_by", resumedBy)
		if c.resumed {
			// Before the queue runs, the session gets its mode and config back.
			ls.mu.Unlock()
			ls.controls.reapply(ctx, before)
			ls.mu.Lock()
		}
		// A resumed session runs what it had queued.
		ls.queue.dispatchLocked(ctx)
	}
	ls.mu.Unlock()
	if err != nil {
		ls.logger.Error("could not record active", "err", err)
		ls.life.requestStop(berth.StopStartupFailed, &berth.Failure{Kind: berth.FailInternal, Message: "the session could not be recorded active"})
		_, _ = ls.proc.Stop(ctx, ls.h.Limits.StopGrace)
		<-ls.life.finished
	}
	return nil
}

// handshakeFailed stops a session whose agent did not complete the
// handshake; the monitor records it as startup_failed with the agent's
// stderr tail.
func (c *conversation) handshakeFailed(ctx context.Context, step string, err error) error {
	ls := c.ls
	msg := fmt.Sprintf("agent handshake failed at %s: %v", step, err)
	var rpcErr *acp.Error
	if errors.As(err, &rpcErr) && len(rpcErr.Data) > 0 && len(rpcErr.Data) <= 4096 {
		// The error's data is often the real cause.
		msg += " (" + string(rpcErr.Data) + ")"
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("agent did not answer %s within %s", step, ls.h.Limits.HandshakeTimeout)
	case errors.Is(err, acp.ErrClosed) || strings.Contains(err.Error(), acp.ErrClosed.Error()):
		msg = fmt.Sprintf("agent exited during the handshake (%s)", step)
	}
	ls.life.requestStop(berth.StopStartupFailed, &berth.Failure{Kind: berth.FailHandshake, Message: msg})
	_, _ = ls.proc.Stop(ctx, ls.h.Limits.StopGrace)
	<-ls.life.finished
	return nil
}

// mcpServers are the MCP servers the agent is given: the session's own,
// then berth's tools when it has them.
func (c *conversation) mcpServers() []acp.McpServer {
	ls := c.ls
	ls.mu.Lock()
	mcp := acpMCPServers(ls.sess.MCPServers)
	ls.mu.Unlock()
	if c.tools != nil {
		mcp = append(mcp, *c.tools)
	}
	return mcp
}
