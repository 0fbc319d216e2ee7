package live

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// conversation is the agent's ACP conversation of the session: how it
// begins (new, reopened after a resume, forked), opened once the agent is
// up, or once it is authenticated, and replaced by a clear. Its fields are
// set before the live session is live and never change, but for acpID,
// init and handler (set by start), and awaitingAuth, clearing and carry,
// which the session's mu guards.
type conversation struct {
	ls *Session
	// resumeFrom is the ACP session id a resumed session reopens; resumed
	// is set when it resumes a stopped session.
	resumeFrom string
	resumed    bool
	// fork is what a session forked from a checkpoint starts from; nil
	// for any other.
	fork *Fork
	// tools is the berth entry of the agent's MCP servers, with the
	// socket and credential of the agent start under way (nil without
	// berth tools); set before the agent starts, read for its session/new,
	// load or resume. toolsWarning, set with it, says why the agent has no
	// berth tools; Start logs it.
	tools        *acp.McpServer
	toolsWarning string
	// earlyNew waits for the answer to the session/new the shim sent on
	// the agent's answer to initialize (nil when it sent none); open takes
	// it once.
	earlyNew func(context.Context) (acp.NewSessionResponse, error)
	// acpID is the agent's session id; clear replaces it while no turn runs.
	acpID atomic.Pointer[string]
	// init and handler are the agent's initialize answer and berth's
	// handler of its connection, kept for a start finished later
	// (authenticate) and for clear.
	init    *acp.InitializeResponse
	handler *agentHandler

	// authMu serialises authenticate and clear: each may open a
	// conversation (the lock order is written on Session).
	authMu sync.Mutex
	// awaitingAuth is set while the session waits in starting for
	// authenticate; clearing while clear replaces the conversation (no
	// input is taken or dispatched meanwhile); carry is the transcript the
	// next prompt carries to an agent that could not reopen the
	// conversation. The session's mu guards them.
	awaitingAuth bool
	clearing     bool
	carry        string
}

// id returns the agent's session id ("" before it has one).
func (c *conversation) id() string {
	if p := c.acpID.Load(); p != nil {
		return *p
	}
	return ""
}

// setID records the agent's session id.
func (c *conversation) setID(id string) { c.acpID.Store(&id) }

// opened is the agent's conversation as conversation.open opened it.
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
		return c.openFork(ctx, caps, mcp)
	}
	if prev == "" {
		newSession := func(ctx context.Context) (acp.NewSessionResponse, error) {
			return ls.client.NewSession(ctx, ls.workspace, mcp)
		}
		if c.earlyNew != nil {
			newSession, c.earlyNew = c.earlyNew, nil
		}
		ns, err := newSession(ctx)
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
		// Its idle clock starts once it can take a prompt: a start or a
		// resume slower than its idle timeout is not reaped on arrival.
		s.LastActivityAt = time.Now().UTC()
	})
	c.awaitingAuth = false
	if err == nil {
		started := berth.NewEvent(ls.id, "", berth.EventSessionStarted, map[string]any{
			"agent_info": info.AgentInfo, "protocol_version": info.ProtocolVersion,
			"capabilities": info.Capabilities, "resumed_by": resumedBy})
		ls.out.endHandshakeLocked(&started, ls.client.AnsweredTo())
		ls.emitEvent(started)
		ls.out.flushEarlyLocked()
		ls.logger.Info("session started", "agent", ls.spec.Name, "resumed_by", resumedBy)
		// Before the queue runs, the session gets its mode and config back
		// and the agent is taken out of a mode that would not ask.
		if c.resumed || ls.spec.AskingMode != "" {
			ls.mu.Unlock()
			if c.resumed {
				ls.controls.reapply(ctx, before)
			}
			ls.controls.askFirst(ctx)
			ls.mu.Lock()
		}
		// A resumed session runs what it had queued; an idle one takes
		// its first turn's checkpoint ahead.
		ls.queue.dispatchLocked(ctx)
		ls.turns.warmUpLocked(nil)
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
		// What the daemon read of the agent meanwhile tells a silent agent
		// from an answer lost on the way.
		st := ls.client.Stats()
		ls.logger.Warn("the agent's handshake timed out", "step", step, "messages_read", st.Messages,
			"skipped_lines", st.SkippedLines, "oversized_lines", st.OversizedLines)
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

// openFork opens the forked conversation: through session/fork when the
// agent offers it at a turn (and it is the parent's agent), else a new
// conversation whose first prompt carries the parent's turns before the
// checkpoint; how is "fork" or "transcript". Either way its controls are
// what the agent answered.
func (c *conversation) openFork(ctx context.Context, caps acp.AgentCapabilities, mcp []acp.McpServer) (opened, error) {
	ls := c.ls
	f := c.fork
	if caps.CanForkAtTurn() && f.Agent == ls.sess.Agent && f.ACPSession != "" {
		fs, err := ls.client.ForkSession(ctx, f.ACPSession, ls.workspace, mcp, f.Turns)
		if err == nil && fs.SessionID != "" {
			return opened{id: fs.SessionID, how: "fork", setup: fs.SessionSetup}, nil
		}
		ls.mu.Lock()
		if !ls.exited {
			ls.Emit("", berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
				"the agent could not fork the conversation (session/fork: %v): it starts a new one, given the parent's turns", err)})
		}
		ls.mu.Unlock()
	}
	ns, err := ls.client.NewSession(ctx, ls.workspace, mcp)
	if err != nil {
		return opened{}, err
	}
	if f.Preamble != "" {
		if err := ls.h.Checkpoints.AddNote(ls.id, f.Preamble); err != nil {
			ls.logger.Warn("the parent's turns for the fork's first prompt were not kept", "err", err)
		}
	}
	return opened{id: ns.SessionID, how: "transcript", setup: ns.SessionSetup}, nil
}

// Fork is what a live session forked from a checkpoint starts from:
// the parent's agent and conversation, how many turns of it come before
// the checkpoint, and those turns rendered for a new conversation's first
// prompt ("" when there were none).
type Fork struct {
	Agent, ACPSession string
	Turns             int
	Preamble          string
}
