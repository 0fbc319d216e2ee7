package session

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/shim"

	live "github.com/berth-sh/berth/session/live"
)

// reconcile finds sessions a previous daemon left live. Those whose agent
// runs on in its shim are returned for the boot to reattach in the
// background (see boot.go), which reads the sessions whole, with what
// the store holds to carry each on, once the API listens (recoveryOf):
// what it reads here is only each live session's state and shim
// (berth.RecoveryStore.ListLive). The others lost their agent with the
// daemon (or the machine) and are closed now: each becomes
// stopped/daemon_crashed, whatever it left running is killed, an open
// turn gets its closing turn_ended, and session_stopped is appended. No
// session reads active with nothing behind it. It returns the sessions
// closed with prompts still queued, to resume. A cluster node looks only
// at the sessions whose lease it still holds.
func (rc *recovery) reconcile(ctx context.Context) (attach []berth.LiveSession, resume []string, err error) {
	live, err := rc.m.store.ListLive(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: list live sessions: %w", err)
	}
	// In creation order (ids are ULIDs), whatever order the store gave.
	slices.SortFunc(live, func(a, b berth.LiveSession) int { return cmp.Compare(a.ID, b.ID) })
	var lost []berth.LiveSession
	for _, l := range live {
		if rc.m.leases.clustered() && !rc.m.opts.Cluster.Holds(ctx, l.ID) {
			// Another node's, or one a lost node left for the
			// others to close: not this one's to touch.
			continue
		}
		if l.ShimSocket != "" && l.State == berth.StateActive {
			attach = append(attach, l)
		} else {
			lost = append(lost, l)
		}
	}
	if resume, err = rc.closeLost(ctx, lost); err != nil {
		return nil, nil, err
	}
	return attach, resume, nil
}

// closeLost closes sessions found live whose agent is gone, and returns
// those with prompts still queued.
func (rc *recovery) closeLost(ctx context.Context, lost []berth.LiveSession) ([]string, error) {
	if len(lost) == 0 {
		return nil, nil
	}
	// One pass over /proc finds what every session that lost its agent
	// left running: its agent and the terminals it started (all carry
	// BERTH_SESSION_ID). A boot that lost nothing skips it.
	leftovers := sessionProcesses()
	var resume []string
	for _, l := range lost {
		s, err := rc.m.store.GetSession(ctx, l.ID)
		if berth.IsCode(err, berth.ENotFound) {
			// Deleted since it was listed: nothing left to close.
			continue
		}
		if err != nil {
			return resume, fmt.Errorf("reconcile %s: %w", l.ID, err)
		}
		if err := rc.reconcileOne(ctx, s, leftovers[s.ID]); err != nil {
			return resume, fmt.Errorf("reconcile %s: %w", s.ID, err)
		}
		queued, err := rc.m.store.ListQueue(ctx, s.ID)
		if err != nil {
			return resume, fmt.Errorf("reconcile %s: %w", s.ID, err)
		}
		if len(queued) > 0 {
			resume = append(resume, s.ID)
		}
	}
	return resume, nil
}

// resumeQueued resumes, in the background, sessions reconcile found
// with prompts still queued: the daemon accepted them, so they run. A
// session that cannot resume keeps its entries for a later resume.
func (rc *recovery) resumeQueued(ids []string) {
	if len(ids) == 0 || rc.m.set.enter(&rc.m.inflight) != nil {
		return
	}
	go func() {
		defer rc.m.inflight.Done()
		for _, id := range ids {
			if _, err := rc.m.ResumeSession(context.Background(), id); err != nil {
				rc.m.logger.Warn("queued prompts not resumed", "session_id", id, "err", err)
			}
		}
	}()
}

// reconcileOne closes one session found live at boot.
// leftovers are the processes found running with its id.
func (rc *recovery) reconcileOne(ctx context.Context, s *berth.Session, leftovers []int) error {
	if err := rc.closeSession(ctx, s, leftovers, crashClose); err != nil {
		return err
	}
	// The session is stopped: in a cluster its lease goes back.
	rc.m.leases.release(ctx, s.ID)
	return nil
}

// closeHow says why a session whose agent is gone is closed: the stop
// reason, its failure (nil for none) and the error its open turn ends with.
type closeHow struct {
	reason  berth.StopReason
	failure func(s *berth.Session) *berth.Failure
	turnErr *berth.ACPError
}

// crashClose closes a session whose daemon stopped under it.
var crashClose = closeHow{reason: berth.StopDaemonCrashed,
	failure: func(s *berth.Session) *berth.Failure {
		return &berth.Failure{Kind: berth.FailInternal, Message: "the daemon stopped while the session was " + string(s.State)}
	},
	turnErr: &berth.ACPError{Code: "daemon_crashed", Message: "the daemon stopped during the turn"}}

// nodeLostClose closes a session whose node was lost (another node took
// its lease over): no failure, it is resumable on any node.
var nodeLostClose = closeHow{reason: berth.StopNodeLost,
	failure: func(*berth.Session) *berth.Failure { return nil },
	turnErr: &berth.ACPError{Code: "node_lost", Message: "the session's node was lost during the turn"}}

// closeSession closes a session whose agent is gone, as how says:
// whatever it left running is killed, an open turn gets its closing
// turn_ended, pending questions are canceled, session_stopped is
// appended and the session is recorded stopped.
func (rc *recovery) closeSession(ctx context.Context, s *berth.Session, leftovers []int, how closeHow) error {
	for _, pid := range leftovers {
		// The process's whole group goes: the agent's or a terminal's. The
		// list was read a while ago: a pid no longer the session's is spared.
		if procfs.KillIfEnv(pid, "BERTH_SESSION_ID="+s.ID, true) {
			rc.m.logger.Warn("killed a process left by a previous daemon", "session_id", s.ID, "pid", pid)
		}
	}
	if s.ShimSocket != "" {
		// A shim that did not answer: it goes, and its files with it.
		files := shim.BundleOf(s.ShimSocket, s.ID)
		if pid := shim.KillByPIDFile(files.PIDFile, filepath.Dir(s.ShimSocket)); pid > 0 {
			rc.m.logger.Warn("killed a shim that did not answer", "session_id", s.ID, "pid", pid)
		}
		files.Remove(true)
	}
	// A daemon that logged session_stopped but died before recording the
	// state leaves the log complete already: nothing may follow it.
	ended, err := rc.endsStopped(ctx, s.ID)
	if err != nil {
		return err
	}
	open := ""
	if !ended {
		if open, err = rc.openTurn(ctx, s.ID); err != nil {
			return err
		}
	}
	// Pending questions die with the agent that asked them.
	pending, err := rc.m.store.ListPermissions(ctx, s.ID, berth.PermissionPending)
	if err != nil {
		return err
	}
	for _, p := range pending {
		now := time.Now().UTC()
		p.State, p.DecidedBy, p.DecidedAt = berth.PermissionCanceled, berth.DecidedByCancel, &now
		if err := rc.m.store.DecidePermission(ctx, p); err != nil && !berth.IsCode(err, berth.EConflict) {
			return err
		}
		if ended {
			continue
		}
		tag := ""
		if p.TurnID == open {
			tag = open
		}
		if _, err := rc.appendClosing(ctx, berth.NewEvent(s.ID, tag, berth.EventPermissionResolved,
			live.ResolvedData{PermissionID: p.ID, DecidedBy: berth.DecidedByCancel})); err != nil {
			return err
		}
	}
	if err := rc.reconcileElicitations(ctx, s, open, ended); err != nil {
		return err
	}
	if open != "" {
		// Tool calls the turn left pending or in progress fail with it.
		calls, err := rc.danglingCalls(ctx, s.ID, open)
		if err != nil {
			return err
		}
		for _, c := range calls {
			if _, err := rc.appendClosing(ctx, berth.NewEvent(s.ID, open, berth.EventToolCallUpdate, interruptedCall(c.id))); err != nil {
				return err
			}
		}
		_, err = rc.appendClosing(ctx, berth.NewEvent(s.ID, open, berth.EventTurnEnded, live.TurnEndedData{
			StopReason: berth.TurnError, Error: how.turnErr}))
		if err != nil {
			return err
		}
	}
	f := how.failure(s)
	if !ended {
		if _, err := rc.appendClosing(ctx, berth.NewEvent(s.ID, "", berth.EventSessionStopped,
			map[string]any{"stop_reason": how.reason, "failure": f})); err != nil {
			return err
		}
	}
	from := s.State
	s.State, s.StopReason, s.Failure, s.AgentPID = berth.StateStopped, how.reason, f, 0
	s.ShimSocket, s.ShimPID = "", 0
	s.PendingPermissions = 0
	s.Resumable = live.Resumable(s, rc.m.place.managedMovesHere(s) != "")
	s.Badge = s.ComputeBadge(false, false)
	if err := rc.m.store.UpdateSession(ctx, s, from); err != nil {
		return err
	}
	kind := ""
	if f != nil {
		kind = f.Kind
	}
	rc.m.opts.Observer.AgentExited(how.reason, kind)
	return nil
}

// danglingCalls returns the tool calls of a turn that never reached a
// final status, reading only the turn's tool events (an index range).
func (rc *recovery) danglingCalls(ctx context.Context, id, turnID string) ([]openCall, error) {
	var evs []berth.Event
	for _, typ := range []string{berth.EventToolCall, berth.EventToolCallUpdate} {
		after := int64(0)
		for {
			page, err := rc.m.store.ListEvents(ctx, id, berth.EventFilter{After: after, Type: typ, TurnID: turnID, Limit: berth.MaxEventLimit})
			if err != nil {
				return nil, err
			}
			evs = append(evs, page...)
			if len(page) < berth.MaxEventLimit {
				break
			}
			after = page[len(page)-1].Seq
		}
	}
	slices.SortFunc(evs, func(a, b berth.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	sc := &logScan{}
	state := map[string]int{}
	for _, ev := range evs {
		sc.observe(ev, state)
	}
	var out []openCall
	for _, c := range sc.calls {
		if state[c.id] >= 0 {
			out = append(out, c)
		}
	}
	return out, nil
}

// endsStopped reports whether a session's log ends with session_stopped,
// but for the model calls that ended after it (usage.go, lateAfterStop).
func (rc *recovery) endsStopped(ctx context.Context, id string) (bool, error) {
	last, err := rc.m.store.LastSeq(ctx, id)
	if err != nil || last == 0 {
		return false, err
	}
	evs, err := rc.m.store.ListEvents(ctx, id, berth.EventFilter{After: max(last-lateTail, 0), Limit: lateTail})
	if err != nil {
		return false, err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if !lateAfterStop(evs[i].Type) {
			return evs[i].Type == berth.EventSessionStopped, nil
		}
	}
	return false, nil
}

// openTurn returns the id of the session's last turn if it never ended.
func (rc *recovery) openTurn(ctx context.Context, id string) (string, error) {
	started, err := rc.lastOfType(ctx, id, berth.EventTurnStarted)
	if err != nil || started == nil {
		return "", err
	}
	ended, err := rc.m.store.ListEvents(ctx, id, berth.EventFilter{After: started.Seq, Type: berth.EventTurnEnded, TurnID: started.TurnID, Limit: 1})
	if err != nil || len(ended) > 0 {
		return "", err
	}
	return started.TurnID, nil
}

// lastOfType returns the last event of a type, paging forward through that
// type's index.
func (rc *recovery) lastOfType(ctx context.Context, id, typ string) (*berth.Event, error) {
	var last *berth.Event
	after := int64(0)
	for {
		evs, err := rc.m.store.ListEvents(ctx, id, berth.EventFilter{After: after, Type: typ, Limit: berth.MaxEventLimit, MaxBytes: berth.EventPageBytes})
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return last, nil
		}
		last = &evs[len(evs)-1]
		after = last.Seq
	}
}

// sessionProcesses maps session ids to the pids of live processes whose
// environment names them (BERTH_SESSION_ID, set for every process a
// session starts), so a reused pid is never taken for a session's.
func sessionProcesses() map[string][]int { return procfs.ByEnv("BERTH_SESSION_ID") }

// appendClosing appends one event of a session being closed. A conflict
// is tried once more: the log's idea of the session's last seq may be
// stale when another node wrote it last (the failure makes the log read
// it again).
func (rc *recovery) appendClosing(ctx context.Context, ev berth.Event) ([]berth.Event, error) {
	out, err := rc.m.log.AppendSync(ctx, ev)
	if berth.IsCode(err, berth.EConflict) {
		out, err = rc.m.log.AppendSync(ctx, ev)
	}
	return out, err
}
