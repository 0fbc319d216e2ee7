package session

import (
	"context"

	"github.com/berth-sh/berth"
)

// origin is where a created session comes from: a root (the API's
// create), a child of a live session (SpawnChild, children.go) or a fork
// of a checkpoint (Fork, checkpoint.go). The create pipeline is the same
// for all three; each origin narrows, shapes and fills the new session
// its own way at the stages that ask it.
type origin interface {
	// narrow checks what the create resolved (the real workspace, the
	// provider, the network, the limits) against what the origin allows,
	// and narrows it: a child gets no more than its parent.
	narrow(b *birth) error
	// shape fills the origin's part of the new session's record: a
	// child's place in its tree, a fork's parent.
	shape(s *berth.Session)
	// fill makes the new workspace what the session starts from: a
	// fork's checkpoint, a child's parent's worktree.
	fill(ctx context.Context, b *birth) error
	// admit lets the session in among the origin's sessions (a child
	// among its parent's live children) until unlock, once it is live.
	admit(s *berth.Session) (unlock func(), err error)
	// born is told the session is live (a child's parent logs
	// child_started).
	born(s *berth.Session)
	// retry answers a create that failed with err: a child whose
	// Idempotency-Key a concurrent retry stored first is that child.
	retry(ctx context.Context, err error) (*berth.Session, error)
}

// root is the origin of a session created by the API: nothing to narrow,
// shape or fill.
type root struct{}

func (root) narrow(*birth) error                                        { return nil }
func (root) shape(*berth.Session)                                       {}
func (root) fill(context.Context, *birth) error                         { return nil }
func (root) admit(*berth.Session) (func(), error)                       { return func() {}, nil }
func (root) born(*berth.Session)                                        {}
func (root) retry(_ context.Context, err error) (*berth.Session, error) { return nil, err }
