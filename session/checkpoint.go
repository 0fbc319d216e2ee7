package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/checkpoint"
)

// rewindNote is prepended to the first prompt after a rewind: the agent's
// memory of the workspace is now wrong.
const rewindNote = "[berth: the user rewound the workspace to its state before an earlier turn; files may differ from what this conversation did to them since]\n"

// forkSpec is what a session forked from a checkpoint starts from.
type forkSpec struct {
	parent     *berth.Session
	checkpoint *checkpoint.Checkpoint
	// turns are the parent's turns before the checkpoint's.
	turns []berth.TranscriptTurn
}

// takeNote returns what the next prompt begins with after a rewind or a
// fork (kept on disk until then); "" when nothing.
func (rt *runtime) takeNote() string {
	if st := rt.h.checkpoints; st != nil {
		return st.TakeNote(rt.id)
	}
	return ""
}

// checkpointTurn records the workspace before the turn t reaches the
// agent: the walk and the changed files' contents before, the fsyncs and
// the manifest after the prompt is on its way (on a goroutine turnWG
// counts; the checkpoint is listed once they are done). A failure is a
// runtime_warning: the turn goes on without one.
func (rt *runtime) checkpointTurn(t *turn) {
	st := rt.h.checkpoints
	if st == nil {
		return
	}
	warn := func(err error) {
		rt.logger.Warn("checkpoint not taken", "turn_id", t.id, "err", err)
		rt.emit(t.id, berth.EventRuntimeWarning, map[string]any{"reason": "no checkpoint was taken before this turn: " + berth.ErrorMessage(err)})
	}
	rt.mu.Lock()
	tree := rt.sess.RootID
	rt.mu.Unlock()
	if tree == "" {
		tree = rt.id
	}
	p, err := st.CaptureIn(context.Background(), tree, rt.id, t.id, rt.workspace, rt.h.hidden...)
	if err != nil {
		warn(err)
		return
	}
	c := p.Checkpoint()
	rt.mu.Lock()
	t.checkpoint = c.ID
	rt.mu.Unlock()
	rt.emit(t.id, berth.EventCheckpointCreated, map[string]any{"id": c.ID, "turn_id": t.id,
		"files": c.Files, "bytes": c.Bytes, "skipped": c.SkippedTotal})
	rt.turnWG.Add(1)
	go func() {
		defer rt.turnWG.Done()
		if _, err := p.Commit(); err != nil {
			warn(err)
			return
		}
		rt.pruneTree(t.id, tree)
	}()
}

// pruneTree keeps the checkpoints of the session's tree under [checkpoints]
// max_tree_bytes once the turn turnID added one (docs/api.md, Checkpoints).
// Each checkpoint pruned is logged checkpoint_pruned in the log of the
// session it was of, or, when that session's log takes nothing more (it
// stopped: session_stopped is its last event), in this one's, whose turn
// made the tree grow. A failure is a runtime_warning: the turn goes on.
func (rt *runtime) pruneTree(turnID, tree string) {
	pruned, err := rt.h.checkpoints.Prune(tree, rt.h.turnCheckpoints(tree))
	for _, p := range pruned {
		data := map[string]any{"checkpoint_id": p.CheckpointID, "turn_id": p.TurnID, "session_id": p.SessionID,
			"freed_bytes": p.FreedBytes, "removed_bytes": p.RemovedBytes, "tree_bytes": p.TreeBytes}
		if p.SessionID == rt.id || !rt.h.toLive(p.SessionID, berth.EventCheckpointPruned, data) {
			rt.emit(turnID, berth.EventCheckpointPruned, data)
		}
	}
	if err != nil {
		rt.logger.Warn("checkpoints not pruned", "tree", tree, "err", err)
		rt.emit(turnID, berth.EventRuntimeWarning, map[string]any{"reason": "the checkpoints of this session's tree were not pruned: " + berth.ErrorMessage(err)})
	}
}

// turnCheckpoints names the checkpoints the turns in flight of tree's live
// sessions were taken before: a prune keeps them, so that a turn still
// running can be rewound whatever its children write meanwhile.
func (m *Manager) turnCheckpoints(tree string) map[string]bool {
	pinned := map[string]bool{}
	for _, rt := range m.runtimes() {
		if c := rt.turnCheckpoint(tree); c != "" {
			pinned[c] = true
		}
	}
	return pinned
}

// turnCheckpoint is the checkpoint of the session's turn in flight when the
// session is in tree ("" when not, or none).
func (rt *runtime) turnCheckpoint(tree string) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if (rt.id == tree || rt.sess.RootID == tree) && rt.turn != nil {
		return rt.turn.checkpoint
	}
	return ""
}

// ListCheckpoints implements berth.SessionService.
func (m *Manager) ListCheckpoints(ctx context.Context, id string) ([]*berth.Checkpoint, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
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
	if err := m.awaitBoot(ctx, id); err != nil {
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
	rt := m.runtimeOf(id)
	if rt == nil {
		return nil, berth.Errorf(berth.EConflict, "session is %s: resume it to rewind", s.State)
	}
	if err := rt.awaitHandshake(ctx); err != nil {
		return nil, err
	}
	if err := rt.rewind(ctx, c, func() string { return m.busyIn(s.Workspace, id) }); err != nil {
		return nil, err
	}
	return m.GetSession(ctx, id)
}

// rewind restores the workspace of the idle session to checkpoint c, once
// othersBusy says no other session runs a turn in it.
func (rt *runtime) rewind(ctx context.Context, c *checkpoint.Checkpoint, othersBusy func() string) error {
	rt.mu.Lock()
	err := rt.acceptingLocked()
	if err == nil && (rt.turn != nil || rt.sess.Queue.Pending > 0 || rt.steer != nil) {
		err = berth.Errorf(berth.EConflict, "a turn is in flight: rewind needs an idle session")
	}
	if err != nil {
		rt.mu.Unlock()
		return err
	}
	rt.rewinding = true
	rt.mu.Unlock()
	// A child shares its parent's workspace: none may be mid-turn in it.
	if other := othersBusy(); other != "" {
		rt.mu.Lock()
		rt.rewinding = false
		rt.mu.Unlock()
		return berth.Errorf(berth.EConflict, "session %s is running a turn in the same workspace", other)
	}

	res, err := rt.h.checkpoints.Restore(context.WithoutCancel(ctx), rt.id, c.ID, rt.workspace, rt.h.hidden...)

	if err == nil {
		if nerr := rt.h.checkpoints.AddNote(rt.id, rewindNote); nerr != nil {
			rt.logger.Warn("the rewind's note for the agent was not kept", "err", nerr)
		}
	}
	rt.mu.Lock()
	rt.rewinding = false
	if err == nil {
		rt.emit("", berth.EventWorkspaceRewound, map[string]any{"checkpoint_id": c.ID, "turn_id": c.TurnID,
			"written": res.Written, "removed": res.Removed, "conflicts": res.Conflicts})
	}
	rt.mu.Unlock()
	if err != nil {
		rt.logger.Error("rewind failed", "checkpoint_id", c.ID, "err", err)
		return err
	}
	if err := rt.h.log.FlushSession(ctx, rt.id); err != nil {
		rt.logger.Warn("flush after rewind", "err", err)
	}
	return nil
}

// busyIn returns a live session other than self whose workspace is ws and
// that has a turn in flight, or "".
func (m *Manager) busyIn(ws, self string) string {
	for _, rt := range m.runtimes() {
		if rt.id != self && rt.turnIn(ws) {
			return rt.id
		}
	}
	return ""
}

// turnIn reports whether the session works in ws and has a turn in flight.
func (rt *runtime) turnIn(ws string) bool {
	if rt.workspace != ws {
		return false
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.turn != nil
}

// Fork implements berth.SessionService: a new session in a new managed
// workspace filled from the checkpoint, with the parent's settings and,
// unless the request names another, agent.
func (m *Manager) Fork(ctx context.Context, id string, req berth.ForkRequest) (*berth.Session, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := m.enter(); err != nil {
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
			text, err := t.Long.Head(ctx, maxTurnText)
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
	creq := berth.CreateRequest{Agent: agent, Name: req.Name, Sandbox: parent.Sandbox.Provider, Network: parent.Sandbox.Network,
		PermissionMode: parent.PermissionMode, Env: parent.Env, Labels: labels, TTLSeconds: parent.TTLSeconds,
		IdleTimeoutSeconds: parent.IdleTimeoutSeconds, MCPServers: parent.MCPServers, BerthTools: &tools}
	return m.create(ctx, creq, nil, f)
}

// fillFork makes the new workspace the checkpoint's copy. A fork that
// runs the parent's agent also gets a copy of that agent's private home,
// where an agent keeps its conversations (session/fork reads the
// parent's there); a fork with another agent gets none of it (it could
// hold the parent agent's credentials).
func (m *Manager) fillFork(ctx context.Context, f *forkSpec, s *berth.Session) error {
	s.ForkedFrom = &berth.ForkRef{SessionID: f.parent.ID, CheckpointID: f.checkpoint.ID}
	if _, err := m.opts.Checkpoints.Restore(ctx, f.parent.ID, f.checkpoint.ID, s.Workspace, m.hidden()...); err != nil {
		return err
	}
	if f.parent.Agent == s.Agent {
		if _, err := os.Stat(m.homeDir(f.parent.ID)); err == nil {
			if _, err := m.opts.Checkpoints.CopyTree(ctx, m.homeDir(f.parent.ID), m.homeDir(s.ID)); err != nil {
				m.logger.Warn("the parent agent's home was not copied to the fork", "session_id", s.ID, "err", err)
			}
		}
	}
	return nil
}

// openFork opens the forked conversation: through session/fork when the
// agent offers it at a turn (and it is the parent's agent), else a new
// conversation whose first prompt carries the parent's turns before the
// checkpoint. how is "fork" or "transcript".
func (rt *runtime) openFork(ctx context.Context, caps acp.AgentCapabilities, mcp []acp.McpServer) (string, string, error) {
	f := rt.fork
	if caps.CanForkAtTurn() && f.agent == rt.sess.Agent && f.acpSession != "" {
		sid, err := rt.client.ForkSession(ctx, f.acpSession, rt.workspace, mcp, f.turns)
		if err == nil && sid != "" {
			return sid, "fork", nil
		}
		rt.mu.Lock()
		if !rt.exited {
			rt.emit("", berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
				"the agent could not fork the conversation (session/fork: %v): it starts a new one, given the parent's turns", err)})
		}
		rt.mu.Unlock()
	}
	ns, err := rt.client.NewSession(ctx, rt.workspace, mcp)
	if err != nil {
		return "", "", err
	}
	if f.preamble != "" {
		if err := rt.h.checkpoints.AddNote(rt.id, f.preamble); err != nil {
			rt.logger.Warn("the parent's turns for the fork's first prompt were not kept", "err", err)
		}
	}
	return ns.SessionID, "transcript", nil
}

// forkFrom is what a live session forked from a checkpoint starts from:
// the parent's agent and conversation, how many turns of it come before
// the checkpoint, and those turns rendered for a new conversation's first
// prompt ("" when there were none).
type forkFrom struct {
	agent, acpSession string
	turns             int
	preamble          string
}

// from is what the fork's live session starts from (nil for no fork).
func (f *forkSpec) from() *forkFrom {
	if f == nil {
		return nil
	}
	return &forkFrom{agent: f.parent.Agent, acpSession: f.parent.ACP.SessionID, turns: len(f.turns), preamble: forkPreamble(f)}
}

// forkPreamble is the parent's conversation before the checkpoint, for the
// fork's first prompt; "" when there was none.
func forkPreamble(f *forkSpec) string {
	var p preamble
	for i := range f.turns {
		// The turns' texts are in memory (Fork read them): nothing to fail.
		turn, _ := renderTurn(context.Background(), &f.turns[i], maxPreambleTurn)
		p.add(turn)
	}
	return p.String(fmt.Sprintf("[berth: this session was forked from session %s before one of its turns; the conversation so far follows]\n", f.parent.ID))
}
