package live

import (
	"log/slog"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// The one path from a started agent to a live session, for a created, a
// resumed and a reattached session alike:
//
//	reserve  a slot under limits.max_sessions (create, resume)
//	goLive   the live session is in Manager.live: requests find it
//	wire     the started agent is the live session's process and ACP client
//	run      its readers and its monitor start
//
// create and resume go live before the agent starts (a stop or a second
// resume finds the session starting); reattach goes live once the shim
// answered and the turn in flight is set up. Either way wire and run are
// the last two steps, from start (create, resume) or reattach.

// Config says how a live session begins.
type Config struct {
	// Session is the session as stored, spec its agent.
	Session *berth.Session
	Spec    berth.AgentSpec
	Logger  *slog.Logger
	// resumeFrom, with resumed set, is the ACP session a resumed session
	// reopens ("" when the agent never opened one).
	Resumed    bool
	ResumeFrom string
	// Fork is what a session forked from a checkpoint starts from.
	Fork *Fork
	// Shim, with provider and box, is the shim of a reattached session
	// whose agent runs on, and its sandbox as the shim opened it.
	Shim     *shim.Proc
	Provider berth.SandboxProvider
	Box      berth.SandboxConfig
}

// New returns the live session c says, not started yet.
func New(h *Host, c Config) *Session {
	s := c.Session
	ls := &Session{h: h, id: s.ID, sess: *s, spec: c.Spec, workspace: s.Workspace,
		ready: make(chan struct{}), handshook: make(chan struct{}), finished: make(chan struct{}),
		logger: c.Logger.With("session_id", s.ID), tree: treeState{parent: s.ParentID},
	}
	// Each component reaches the session through its back-pointer.
	ls.out.ls, ls.box.ls, ls.files.ls, ls.controls.ls = ls, ls, ls, ls
	ls.asks = asks{ls: ls, perms: map[string]*permWaiter{}, remembered: map[string]string{}}
	ls.queue = queue{ls: ls, outcomes: map[string]EntryOutcome{}, inputChanged: make(chan struct{})}
	ls.turns.ls = ls
	ls.conv.ls, ls.conv.resumed, ls.conv.resumeFrom, ls.conv.fork = ls, c.Resumed, c.ResumeFrom, c.Fork
	if c.Shim != nil {
		ls.box.provider, ls.shim, ls.box.ref, ls.box.socket = c.Provider, c.Shim, c.Shim.Hello().Ref, s.ShimSocket
		ls.box.cfg = c.Box
		ls.conv.setID(s.ACP.SessionID)
	}
	return ls
}

// Abandon ends a session that never started: whoever waits for it is released.
func (ls *Session) Abandon() {
	close(ls.ready)
	close(ls.handshook)
	close(ls.finished)
}

// wire makes the started agent proc the live session's process: its terminals,
// its confined workspace and its ACP client, reading the agent's stdout
// from the stream position opts names. Nothing runs yet (see run).
func (ls *Session) wire(proc berth.Process, opts acp.Options) *agentHandler {
	ls.proc = proc
	ls.terminals = newTerminals(ls)
	ls.files.open()
	opts.MaxLineBytes, opts.Logger = ls.h.Limits.MaxLineBytes, ls.logger
	opts.OnSkippedLine, opts.OnOversizedLine = ls.out.skippedLine, ls.out.oversizedLine
	opts.AdmitRequest = ls.out.admitRequest
	handler := &agentHandler{rt: ls}
	ls.client = acp.NewClient(acp.Pipe{R: proc.Stdout(), W: proc.Stdin()}, handler, opts)
	return handler
}

// run starts what serves a wired live session: the stderr reader, the ACP
// client (then the agent's requests redelivered, those a reattached
// session's previous daemon left unanswered) and the monitor, which alone
// finishes the session.
func (ls *Session) run(redeliver [][]byte) {
	ls.out.stderrWG.Add(1)
	go ls.out.readStderr(ls.proc.Stderr())
	ls.client.Start()
	for _, line := range redeliver {
		ls.client.Redeliver(line)
	}
	ls.h.Monitors.Add(1)
	go ls.monitor()
}
