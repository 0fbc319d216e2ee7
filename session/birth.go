package session

import (
	"context"
	"time"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// A session comes to life one way: through a birth, a pipeline of named
// stages run in order. A create (of a root, a child or a fork), a resume
// and a reattach are each a list of stages (create.go, resume.go,
// reattach.go). A stage that makes something says how to undo it
// (onFail); the first stage that fails undoes everything made so far,
// newest first, and nothing else cleans up. The last stage makes the
// session live; from there nothing is undone: the live session records
// its own failures (a start that fails stops it startup_failed).
//
// Where a session comes from — a root, a child of a live parent, a fork
// of a checkpoint — is its origin, an option of the create pipeline with
// the same shape for all three (origin.go).

// birth is one session on its way to live.
type birth struct {
	m    *Manager
	from origin
	// began is when the create or resume was asked.
	began time.Time

	// What a create asked and resolved.
	req        berth.CreateRequest
	spec       berth.AgentSpec
	provider   berth.SandboxProvider
	unisolated bool
	// wtCommon is the git directory of the repository a worktree is made in.
	wtCommon string
	limits   berth.SandboxLimitsInfo
	// warnings are logged as runtime_warnings once the session's log begins.
	warnings []string
	// fetch is the npm package the agent's start fetches first ("" for none).
	fetch string

	// s is the session's record, ls its live session once made, launch its
	// agent being started.
	s      *berth.Session
	ls     *live.Session
	launch *live.Launching
	// moved is the workspace on this node of a session a resume moves here
	// from another ("" when it stays where it is); movedWithRoot says it
	// is a child's, in its root's workspace, which came with the root.
	moved         string
	movedWithRoot bool

	// fork is what a fork's live session starts from (set by its origin).
	fork *live.Fork
	// unlock ends the origin's admission once the session is live.
	unlock func()

	undo []func()
	// handOver drops the undo of the reserved slot once a live session
	// holds it.
	handOver func()
}

// stage is one named step of a birth.
type stage struct {
	name string
	run  func(ctx context.Context) error
}

// newBirth begins a birth from origin from.
func (m *Manager) newBirth(from origin) *birth {
	return &birth{m: m, from: from, began: time.Now()}
}

// run runs stages in order. On the first failure it undoes what the
// stages before made and returns the error; on success nothing will be
// undone.
func (b *birth) run(ctx context.Context, stages ...stage) error {
	for _, st := range stages {
		if err := st.run(ctx); err != nil {
			b.rollback()
			b.m.logger.Debug("session not started", "stage", st.name, "err", err)
			return err
		}
	}
	b.undo = nil
	return nil
}

// onFail registers undo, run if a later stage fails; drop unregisters it
// (what it undoes was handed on: a reserved slot became a live session).
func (b *birth) onFail(undo func()) (drop func()) {
	i := len(b.undo)
	b.undo = append(b.undo, undo)
	return func() { b.undo[i] = func() {} }
}

// rollback undoes, newest first, what the stages made.
func (b *birth) rollback() {
	for i := len(b.undo) - 1; i >= 0; i-- {
		b.undo[i]()
	}
	b.undo = nil
}

// warn keeps a runtime_warning for the session's log, "" for none.
func (b *birth) warn(reason string) {
	if reason != "" {
		b.warnings = append(b.warnings, reason)
	}
}

// reserve takes a slot under limits.max_sessions; goLive hands it to the
// live session.
func (b *birth) reserve(context.Context) error {
	if err := b.m.set.reserve(); err != nil {
		return err
	}
	b.handOver = b.onFail(b.m.set.release)
	return nil
}

// goLive makes b.ls the session's live session, in the slot b reserved;
// another live session of the same session is returned instead (b.ls is
// not live then, and the slot is still b's to give back).
func (b *birth) goLive() *live.Session {
	if other := b.m.set.goLive(b.ls, true); other != nil {
		return other
	}
	b.handOver()
	return nil
}
