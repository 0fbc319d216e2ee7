package live

import (
	"log/slog"

	"github.com/berth-sh/berth"
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
	// Beside is AgentStart.Beside for a reattached session.
	Beside []string
}

// New returns the live session c says, not started yet.
func New(h *Host, c Config) *Session {
	s := c.Session
	ls := &Session{h: h, id: s.ID, sess: *s, spec: c.Spec, workspace: s.Workspace,
		logger: c.Logger.With("session_id", s.ID)}
	// Each component reaches the session through its back-pointer.
	ls.life = lifecycle{ls: ls, ready: make(chan struct{}), handshook: make(chan struct{}), finished: make(chan struct{})}
	ls.conv = conversation{ls: ls, resumed: c.Resumed, resumeFrom: c.ResumeFrom, fork: c.Fork}
	ls.turns.ls = ls
	ls.queue = queue{ls: ls, outcomes: map[string]EntryOutcome{}, inputChanged: make(chan struct{})}
	ls.asks = asks{ls: ls, perms: map[string]*permWaiter{}, remembered: map[string]string{}}
	ls.out.ls, ls.controls.ls, ls.files.ls, ls.box.ls = ls, ls, ls, ls
	ls.tree = tree{ls: ls, parent: s.ParentID}
	if c.Shim != nil {
		ls.box.provider, ls.shim, ls.box.ref, ls.box.socket = c.Provider, c.Shim, c.Shim.Hello().Ref, s.ShimSocket
		ls.box.cfg, ls.box.beside = c.Box, c.Beside
		ls.conv.setID(s.ACP.SessionID)
	}
	return ls
}

// Abandon ends a session that never started: whoever waits for it is released.
func (ls *Session) Abandon() {
	close(ls.life.ready)
	close(ls.life.handshook)
	close(ls.life.finished)
}
