package live

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/syncx"
)

// rewindNote is prepended to the first prompt after a rewind: the agent's
// memory of the workspace is now wrong.
const rewindNote = "[berth: the user rewound the workspace to its state before an earlier turn; files may differ from what this conversation did to them since]\n"

// TurnCheckpoint is the checkpoint of the session's turn in flight when the
// session is in tree ("" when not, or none).
func (ls *Session) TurnCheckpoint(tree string) string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if (ls.id == tree || ls.sess.RootID == tree) && ls.turns.cur != nil {
		return ls.turns.cur.checkpoint
	}
	return ""
}

// Rewind restores the workspace of the idle session to checkpoint c, once
// othersBusy says no other session runs a turn in it.
func (ls *Session) Rewind(ctx context.Context, c *checkpoint.Checkpoint, othersBusy func() string) error {
	ls.mu.Lock()
	err := ls.queue.acceptingLocked()
	if err == nil && (ls.turns.cur != nil || ls.sess.Queue.Pending > 0 || ls.queue.steer != nil) {
		err = berth.Errorf(berth.EConflict, "a turn is in flight: rewind needs an idle session")
	}
	if err != nil {
		ls.mu.Unlock()
		return err
	}
	ls.rewinding = true
	ls.mu.Unlock()
	// A child shares its parent's workspace: none may be mid-turn in it.
	if other := othersBusy(); other != "" {
		ls.mu.Lock()
		ls.rewinding = false
		ls.mu.Unlock()
		return berth.Errorf(berth.EConflict, "session %s is running a turn in the same workspace", other)
	}

	res, err := ls.h.Checkpoints.Restore(context.WithoutCancel(ctx), ls.id, c.ID, ls.workspace, ls.h.Hidden...)

	if err == nil {
		if nerr := ls.h.Checkpoints.AddNote(ls.id, rewindNote); nerr != nil {
			ls.logger.Warn("the rewind's note for the agent was not kept", "err", nerr)
		}
	}
	ls.mu.Lock()
	ls.rewinding = false
	if err == nil {
		ls.Emit("", berth.EventWorkspaceRewound, map[string]any{"checkpoint_id": c.ID, "turn_id": c.TurnID,
			"written": res.Written, "removed": res.Removed, "conflicts": res.Conflicts})
		// The next turn's checkpoint is of the workspace rewound.
		ls.turns.warmUpLocked(nil)
	}
	ls.mu.Unlock()
	if err != nil {
		ls.logger.Error("rewind failed", "checkpoint_id", c.ID, "err", err)
		return err
	}
	if err := ls.h.Log.FlushSession(ctx, ls.id); err != nil {
		ls.logger.Warn("flush after rewind", "err", err)
	}
	return nil
}

// TurnIn reports whether the session works in ws and has a turn in flight.
func (ls *Session) TurnIn(ws string) bool {
	if ls.workspace != ws {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.turns.cur != nil
}

// takeNote returns what the next prompt begins with after a rewind or a
// fork (kept on disk until then); "" when nothing.
func (tr *turns) takeNote() string {
	ls := tr.ls
	if st := ls.h.Checkpoints; st != nil {
		return st.TakeNote(ls.id)
	}
	return ""
}

// checkpoint records the workspace before the turn t reaches the agent:
// the warm capture taken at the end of the turn before, when nothing in
// the workspace changed since (no walk on the prompt's path), else the
// walk and the changed files' contents now. The fsyncs and the manifest
// follow once the prompt is on its way (on a goroutine turnWG counts; the
// checkpoint is listed once they are done). A failure is a
// runtime_warning: the turn goes on without one.
func (tr *turns) checkpoint(t *turn) {
	ls := tr.ls
	st := ls.h.Checkpoints
	if st == nil {
		return
	}
	warn := func(err error) {
		ls.logger.Warn("checkpoint not taken", "turn_id", t.id, "err", err)
		ls.Emit(t.id, berth.EventRuntimeWarning, map[string]any{"reason": "no checkpoint was taken before this turn: " + berth.ErrorMessage(err)})
	}
	ls.mu.Lock()
	tree, heard := tr.treeLocked(), t.heard
	wm := tr.takeWarmLocked()
	// The last turn's commit, if it still waits for quiet, holds what
	// this one's capture needs: it goes now.
	if tr.urge != nil {
		close(tr.urge)
	}
	urge := make(chan struct{})
	tr.urge = urge
	ls.mu.Unlock()
	var p *checkpoint.Pending
	if wm != nil {
		if taken, ok := wm.Take(t.id); ok {
			p = taken
		} else {
			wm.Close()
			wm = nil
		}
	}
	if p == nil {
		var err error
		if p, err = st.CaptureIn(context.Background(), tree, ls.id, t.id, ls.workspace, ls.h.Hidden...); err != nil {
			warn(err)
			return
		}
	}
	c := p.Checkpoint()
	committed := make(chan struct{})
	ls.mu.Lock()
	t.checkpoint, t.committed = c.ID, committed
	ls.mu.Unlock()
	ls.Emit(t.id, berth.EventCheckpointCreated, map[string]any{"id": c.ID, "turn_id": t.id,
		"files": c.Files, "bytes": c.Bytes, "skipped": c.SkippedTotal})
	ls.turnWG.Add(1)
	go func() {
		defer ls.turnWG.Done()
		defer close(committed)
		tr.awaitWork(t, heard, urge)
		_, err := p.Commit()
		if wm != nil {
			wm.Close()
		}
		if err != nil {
			warn(err)
			return
		}
		tr.prune(t.id, tree)
	}()
}

// commitLinger bounds how long a checkpoint's fsyncs wait for the agent
// to start working (awaitWork).
const commitLinger = time.Second

// awaitWork holds a checkpoint's fsyncs back until the agent's first
// words in the turn, and those of every other turn of the daemon waiting
// for them (Hush), are committed, each wait bounded (commitLinger, the
// Hush's bound; urge closed: the session's next turn needs the commit):
// on a busy disk and two cores they would otherwise hold back those
// words.
func (tr *turns) awaitWork(t *turn, heard, urge <-chan struct{}) {
	ls := tr.ls
	linger := time.NewTimer(commitLinger)
	defer linger.Stop()
	select {
	case <-heard:
	case <-t.done:
	case <-linger.C:
		return
	}
	if !ls.h.Hush.wait(urge) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitLinger)
	defer cancel()
	_ = ls.h.Log.Settled(ctx)
}

// warmRun is the warm capture of the next turn's checkpoint, being taken
// (warm nil) or taken. Guarded by ls.mu.
type warmRun struct {
	cancel context.CancelFunc
	warm   *checkpoint.Warm
}

// warmUpLocked starts the warm capture of the next turn's checkpoint
// (checkpoint.Warm), once after is closed (the last turn's checkpoint is
// committed; nil: now), when the session is idle and not stopping.
func (tr *turns) warmUpLocked(after <-chan struct{}) {
	ls := tr.ls
	st := ls.h.Checkpoints
	if st == nil || tr.cur != nil || tr.warmOff || ls.stopReason != "" || ls.exited || ls.detached.Load() {
		return
	}
	stale, tree := tr.takeWarmLocked(), tr.treeLocked()
	ctx, cancel := context.WithCancel(context.Background())
	run := &warmRun{cancel: cancel}
	tr.warming = run
	ls.turnWG.Add(1)
	go func() {
		defer ls.turnWG.Done()
		defer cancel()
		// Its watches go off the caller's lock.
		if stale != nil {
			stale.Close()
		}
		if after != nil {
			select {
			case <-after:
			case <-ctx.Done():
				return
			}
		}
		pause := rewarmPause
		for {
			// The capture waits while the daemon's other turns wait for
			// their agents' first words (bounded).
			if ls.h.Hush.wait(ctx.Done()); ctx.Err() != nil {
				return
			}
			wm, err := st.WarmIn(ctx, tree, ls.id, ls.workspace, ls.h.Hidden...)
			if err != nil {
				if ctx.Err() == nil {
					ls.logger.Debug("no warm checkpoint: the next turn's is taken when it starts", "err", err)
				}
				return
			}
			ls.mu.Lock()
			keep := tr.warming == run
			var old *checkpoint.Warm
			if keep {
				old, run.warm = run.warm, wm
			}
			ls.mu.Unlock()
			if old != nil {
				old.Close()
			}
			if !keep {
				wm.Close()
				return
			}
			// A change while the session is idle (the user's edit) is
			// taken in once the workspace had a moment; one that keeps
			// changing is taken less and less often.
			select {
			case <-wm.Changed():
			case <-ctx.Done():
				return
			}
			if !syncx.Sleep(ctx, pause) {
				return
			}
			pause = min(2*pause, rewarmMaxPause)
		}
	}()
}

// rewarmPause is how long after a change the next checkpoint is taken
// ahead again while the session is idle; each further change of the
// same idle spell doubles it, up to rewarmMaxPause.
const (
	rewarmPause    = 500 * time.Millisecond
	rewarmMaxPause = time.Minute
)

// treeLocked is the id of the session's tree: its root's, its own for a
// root.
func (tr *turns) treeLocked() string {
	if root := tr.ls.sess.RootID; root != "" {
		return root
	}
	return tr.ls.id
}

// takeWarmLocked ends the warm capture in flight and returns it when it
// was taken (nil when none, or not yet: that one closes itself).
func (tr *turns) takeWarmLocked() *checkpoint.Warm {
	run := tr.warming
	tr.warming = nil
	if run == nil {
		return nil
	}
	run.cancel()
	return run.warm
}

// dropWarm ends warm captures for good: the session is going.
func (tr *turns) dropWarm() {
	ls := tr.ls
	ls.mu.Lock()
	tr.warmOff = true
	wm := tr.takeWarmLocked()
	ls.mu.Unlock()
	if wm != nil {
		wm.Close()
	}
}

// prune keeps the checkpoints of the session's tree under [checkpoints]
// max_tree_bytes once the turn turnID added one (docs/api.md, Checkpoints).
// Each checkpoint pruned is logged checkpoint_pruned in the log of the
// session it was of, or, when that session's log takes nothing more (it
// stopped: session_stopped is its last event), in this one's, whose turn
// made the tree grow. A failure is a runtime_warning: the turn goes on.
func (tr *turns) prune(turnID, tree string) {
	ls := tr.ls
	st := ls.h.Checkpoints
	// The pinned set asks every live session: only when there is a prune.
	if !st.OverBudget(tree) {
		return
	}
	pruned, err := st.Prune(tree, ls.h.TurnCheckpoints(tree))
	for _, p := range pruned {
		data := map[string]any{"checkpoint_id": p.CheckpointID, "turn_id": p.TurnID, "session_id": p.SessionID,
			"freed_bytes": p.FreedBytes, "removed_bytes": p.RemovedBytes, "tree_bytes": p.TreeBytes}
		if p.SessionID == ls.id || !ls.h.ToLive(p.SessionID, berth.EventCheckpointPruned, data) {
			ls.Emit(turnID, berth.EventCheckpointPruned, data)
		}
	}
	if err != nil {
		ls.logger.Warn("checkpoints not pruned", "tree", tree, "err", err)
		ls.Emit(turnID, berth.EventRuntimeWarning, map[string]any{"reason": "the checkpoints of this session's tree were not pruned: " + berth.ErrorMessage(err)})
	}
}
