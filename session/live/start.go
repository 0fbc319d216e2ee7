package live

import (
	"context"
	"fmt"

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
	// initialize is the initialize request the shim hands the agent as it
	// starts (nil: Start sends it).
	initialize []byte
	// sessionNew is the session/new request the shim hands the agent on
	// its answer to initialize (nil: Start sends it).
	sessionNew []byte
}

// Launch starts the agent for Start (or AbortLaunch) to wait for: with
// shims, a shim has its job when Launch returns and starts the agent
// while the create stores the session; without, the sandbox is opened
// and the agent started in the background.
func (ls *Session) Launch(ctx context.Context, provider berth.SandboxProvider) *Launching {
	ls.mu.Lock()
	sess := ls.sess
	ls.mu.Unlock()
	ls.box.provider = provider
	sess.ToolsHash = ""
	st := ls.h.Prepare(&sess, ls.spec, provider)
	ls.conv.tools, ls.conv.toolsWarning, ls.box.cfg, ls.box.program, ls.box.args = st.Tools, st.ToolsWarning, st.Box, st.Program, st.Args
	ls.box.beside = st.Beside
	// The agent's stdout continues the session's stream offsets.
	l := &Launching{done: make(chan struct{}), base: sess.AgentOffset, toolsHash: sess.ToolsHash}
	if ls.h.Shim != nil {
		l.initialize, l.sessionNew = ls.handshakeLines()
	}
	// The agent's home files are fresh copies of the user's at every start.
	if err := ls.h.CopyHomeFiles(ls.spec.HomeFiles, ls.box.cfg.Home); err != nil {
		ls.logger.Warn("home_files", "err", err)
	}
	// A shim has its job before the create goes on to store the session.
	wait := ls.box.launch(ctx, l.base, l.initialize, l.sessionNew)
	// The berth tools' socket is served while the agent starts: only
	// session/new, once it has answered initialize, tells the agent of it.
	if st.ServeTools != nil {
		if w := st.ServeTools(); w != "" {
			ls.conv.tools, l.toolsHash = nil, ""
			if ls.conv.toolsWarning != "" {
				w = ls.conv.toolsWarning + "; " + w
			}
			ls.conv.toolsWarning = w
		}
	}
	go func() {
		defer close(l.done)
		l.proc, l.fail = wait()
	}()
	return l
}

// handshakeLines are the requests a shim hands the agent on the daemon's
// behalf: initialize as it starts (the agent reads it as soon as its own
// start is done, not a hop after the shim is attached) and, for a new
// conversation, session/new on its answer to initialize, without the hop
// to the daemon and back (a resumed or forked one's method depends on
// that answer). Either is nil when it could not be made: Start sends it.
func (ls *Session) handshakeLines() (initialize, sessionNew []byte) {
	initialize, err := acp.InitializeLine(ls.clientInfo())
	if err != nil {
		ls.logger.Warn("initialize not handed to the shim", "err", err)
		return nil, nil
	}
	if ls.conv.resumeFrom != "" || ls.conv.fork != nil {
		return initialize, nil
	}
	if sessionNew, err = acp.SessionNewLine(ls.workspace, ls.conv.mcpServers()); err != nil {
		ls.logger.Warn("session/new not handed to the shim", "err", err)
	}
	return initialize, sessionNew
}

// AbortLaunch ends the agent of a session that could not be stored, and
// its shim: nothing of it was recorded, so nothing else would.
func (ls *Session) AbortLaunch(ctx context.Context, l *Launching) {
	if l == nil {
		return
	}
	<-l.done
	// What its start was granted (the berth tools, the model gateway's
	// key and socket) dies with it.
	ls.h.RevokeTools(ls.id, true)
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
	hctx, cancel := context.WithTimeout(ctx, h.Limits.HandshakeTimeout)
	defer cancel()
	// The initialize request is written now, while the pid is recorded, or
	// the shim handed it to the agent already: the agent reads it as soon
	// as its own start is done. Its answer waits in the stream until the
	// client runs.
	initialize := func(ctx context.Context) (acp.InitializeResponse, error) {
		return ls.client.Initialize(ctx, ls.clientInfo())
	}
	if l.initialize != nil {
		wait, err := ls.client.ExpectInitialize()
		if err != nil {
			return ls.conv.handshakeFailed(ctx, "initialize", err)
		}
		initialize = wait
	}
	if l.sessionNew != nil {
		wait, err := ls.client.ExpectNewSession()
		if err != nil {
			return ls.conv.handshakeFailed(ctx, "session/new", err)
		}
		ls.conv.earlyNew = wait
	}
	inited := make(chan initResult, 1)
	go func() {
		r, err := initialize(hctx)
		inited <- initResult{r, err}
	}()
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

	res := <-inited
	init, err := res.init, res.err
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

// clientInfo is what berth says of itself in initialize.
func (ls *Session) clientInfo() acp.Implementation {
	return acp.Implementation{Name: "berth", Version: ls.h.Version}
}

// initResult is the answer to a start's initialize request.
type initResult struct {
	init acp.InitializeResponse
	err  error
}

// ToolsServer is the berth entry of the agent's MCP servers, with its
// socket and credential (nil when it has no berth tools).
func (ls *Session) ToolsServer() *acp.McpServer { return ls.conv.tools }

// UseSpec gives a live session not launched yet the agent's spec as it
// runs now (its package was fetched meanwhile and runs from the daemon's
// prefix). Only its starter calls it, before Launch.
func (ls *Session) UseSpec(spec berth.AgentSpec) { ls.spec = spec }

// FailedLaunch is a launch that failed before anything was started: Start
// records the session startup_failed with f.
func (ls *Session) FailedLaunch(f *berth.Failure) *Launching {
	l := &Launching{done: make(chan struct{}), fail: f}
	close(l.done)
	return l
}

// StopRequested reports whether a stop of the session was asked.
func (ls *Session) StopRequested() bool { return ls.life.stopping() }
