package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/session/transcript"

	live "github.com/berth-sh/berth/session/live"
)

// forkSpec is what a session forked from a checkpoint starts from.
type forkSpec struct {
	parent     *berth.Session
	checkpoint *checkpoint.Checkpoint
	// turns are the parent's turns before the checkpoint's.
	turns []berth.TranscriptTurn
}

// ListCheckpoints implements berth.SessionService.
func (m *Manager) ListCheckpoints(ctx context.Context, id string) ([]*berth.Checkpoint, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if _, err := m.GetSession(ctx, id); err != nil {
		return nil, err
	}
	out := []*berth.Checkpoint{}
	if m.opts.Checkpoints == nil {
		return out, nil
	}
	list, err := m.opts.Checkpoints.List(id)
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		out = append(out, fromCheckpoint(c))
	}
	return out, nil
}

// fromCheckpoint converts the store's description to the API's.
func fromCheckpoint(c *checkpoint.Checkpoint) *berth.Checkpoint {
	out := &berth.Checkpoint{ID: c.ID, TurnID: c.TurnID, CreatedAt: c.CreatedAt, Files: c.Files, Bytes: c.Bytes,
		Skipped: make([]berth.CheckpointSkip, 0, len(c.Skipped)), SkippedTotal: c.SkippedTotal}
	for _, s := range c.Skipped {
		out.Skipped = append(out.Skipped, berth.CheckpointSkip{Path: s.Path, Reason: s.Reason})
	}
	return out
}

// checkpointOf returns the checkpoint ckptID of session id. EInvalid
// without an id, ENotFound for one the session does not have,
// EUnavailable when checkpoints are off.
func (m *Manager) checkpointOf(id, ckptID string) (*checkpoint.Checkpoint, error) {
	if m.opts.Checkpoints == nil {
		return nil, berth.Errorf(berth.EUnavailable, "checkpoints are off ([checkpoints] enabled = false)")
	}
	if strings.TrimSpace(ckptID) == "" {
		return nil, berth.Errorf(berth.EInvalid, "checkpoint_id is required")
	}
	return m.opts.Checkpoints.Get(id, ckptID)
}

// Rewind implements berth.SessionService: an active, idle session's
// workspace is restored while no input is taken (a prompt meanwhile is
// 409), and the agent's next prompt says so.
func (m *Manager) Rewind(ctx context.Context, id string, req berth.RewindRequest) (*berth.Session, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	// No delete removes the workspace under the restore.
	defer m.sessions.lock(id, false)()
	s, err := m.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	c, err := m.checkpointOf(id, req.CheckpointID)
	if err != nil {
		return nil, err
	}
	ls := m.set.liveOf(id)
	if ls == nil {
		return nil, berth.Errorf(berth.EConflict, "session is %s: resume it to rewind", s.State)
	}
	if err := ls.AwaitHandshake(ctx); err != nil {
		return nil, err
	}
	if err := ls.Rewind(ctx, c, func() string { return m.set.busyIn(s.Workspace, id) }); err != nil {
		return nil, err
	}
	return m.GetSession(ctx, id)
}

// Fork implements berth.SessionService: a new session in a new managed
// workspace filled from the checkpoint, with the parent's settings and,
// unless the request names another, agent.
func (m *Manager) Fork(ctx context.Context, id string, req berth.ForkRequest) (*berth.Session, error) {
	if err := m.set.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := m.set.enter(&m.inflight); err != nil {
		return nil, err
	}
	defer m.inflight.Done()
	parent, err := m.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	c, err := m.checkpointOf(id, req.CheckpointID)
	if err != nil {
		return nil, err
	}
	f := &forkSpec{parent: parent, checkpoint: c}
	errFound := errors.New("found")
	err = m.TranscriptEach(ctx, id, func(t *berth.TranscriptTurn) error {
		if t.TurnID == c.TurnID {
			return errFound
		}
		if t.Long != nil {
			// The fork's first prompt carries at most maxTurnText of a turn.
			text, err := t.Long.Head(ctx, live.MaxTurnText)
			if err != nil {
				return err
			}
			t.Text, t.Long = text, nil
		}
		f.turns = append(f.turns, *t)
		return nil
	})
	if err != nil && !errors.Is(err, errFound) {
		return nil, err
	}
	agent := req.Agent
	if agent == "" {
		agent = parent.Agent
	}
	labels := make(map[string]string, len(parent.Labels))
	for k, v := range parent.Labels {
		labels[k] = v
	}
	tools := parent.BerthTools
	creq := berth.CreateRequest{Agent: agent, Name: req.Name, Sandbox: parent.Sandbox.Provider, Network: parent.Sandbox.PolicyOf(),
		PermissionMode: parent.PermissionMode, Env: parent.Env, Labels: labels, TTLSeconds: parent.TTLSeconds,
		IdleTimeoutSeconds: parent.IdleTimeoutSeconds, MCPServers: parent.MCPServers, BerthTools: &tools}
	return m.create(ctx, creq, f)
}

// narrow, admit, born and retry are a root's (origin): a fork is a root
// that starts from a checkpoint.
func (*forkSpec) narrow(*birth) error                  { return nil }
func (*forkSpec) admit(*berth.Session) (func(), error) { return func() {}, nil }
func (*forkSpec) born(*berth.Session)                  {}
func (*forkSpec) retry(_ context.Context, err error) (*berth.Session, error) {
	return nil, err
}

// shape records the fork's parent and checkpoint (origin).
func (f *forkSpec) shape(s *berth.Session) {
	s.ForkedFrom = &berth.ForkRef{SessionID: f.parent.ID, CheckpointID: f.checkpoint.ID}
}

// fill makes the new workspace the checkpoint's copy (origin). A fork
// that runs the parent's agent also gets a copy of that agent's private
// home, where an agent keeps its conversations (session/fork reads the
// parent's there); a fork with another agent gets none of it (it could
// hold the parent agent's credentials).
func (f *forkSpec) fill(ctx context.Context, b *birth) error {
	m, s := b.m, b.s
	if _, err := m.opts.Checkpoints.Restore(ctx, f.parent.ID, f.checkpoint.ID, s.Workspace, m.place.hidden()...); err != nil {
		return err
	}
	if f.parent.Agent == s.Agent {
		if _, err := os.Stat(m.place.homeDir(f.parent.ID)); err == nil {
			if _, err := m.opts.Checkpoints.CopyTree(ctx, m.place.homeDir(f.parent.ID), m.place.homeDir(s.ID)); err != nil {
				m.logger.Warn("the parent agent's home was not copied to the fork", "session_id", s.ID, "err", err)
			}
		}
	}
	b.fork = f.from()
	return nil
}

// from is what the fork's live session starts from.
func (f *forkSpec) from() *live.Fork {
	return &live.Fork{Agent: f.parent.Agent, ACPSession: f.parent.ACP.SessionID, Turns: len(f.turns), Preamble: forkPreamble(f)}
}

// forkPreamble is the parent's conversation before the checkpoint, for the
// fork's first prompt; "" when there was none.
func forkPreamble(f *forkSpec) string {
	var p transcript.Preamble
	for i := range f.turns {
		// The turns' texts are in memory (Fork read them): nothing to fail.
		turn, _ := transcript.RenderTurn(context.Background(), &f.turns[i], transcript.MaxPreambleTurn)
		p.Add(turn)
	}
	return p.String(fmt.Sprintf("[berth: this session was forked from session %s before one of its turns; the conversation so far follows]\n", f.parent.ID))
}
