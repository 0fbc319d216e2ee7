package live

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
)

// asks are the questions the agent asks the user: permission requests
// (permission.go) and elicitations (elicitation.go). Each is stored,
// logged, and waits on the goroutine the ACP connection serves it on, so
// a question pending in one session holds up nothing else. The session's
// mu guards the fields.
type asks struct {
	ls *Session
	// perms are the permission requests waiting for a decision; remembered
	// maps a tool kind to the allow_always or reject_always a user gave it.
	perms      map[string]*permWaiter
	remembered map[string]string
	// adoptable are the pending permissions of a reattached session: the
	// agent's request, served again, takes its record back instead of
	// making a new one.
	adoptable []berth.Permission
	// elics are the elicitations waiting for an answer, adoptableElics
	// the stored pending ones of a reattached session.
	elics          map[string]*elicWaiter
	adoptableElics []berth.Elicitation
	// elicsArriving counts requests past the cap check not yet waiting.
	elicsArriving int
	// arriving are the questions whose record is being written, each
	// closed once the question waits or was settled: the record is
	// listed pending a moment before the question waits.
	arriving map[string]chan struct{}
}

// arriveLocked marks id a question whose record is about to be written.
func (a *asks) arriveLocked(id string) {
	if a.arriving == nil {
		a.arriving = map[string]chan struct{}{}
	}
	a.arriving[id] = make(chan struct{})
}

// arrivedLocked ends arriveLocked: the question waits, was settled, or
// was never recorded.
func (a *asks) arrivedLocked(id string) {
	if ch, ok := a.arriving[id]; ok {
		close(ch)
		delete(a.arriving, id)
	}
}

// awaitArrival waits while question id is on its way in, so that a user
// who found its record pending decides it instead of meeting a conflict.
// The wait is one store write long.
func (a *asks) awaitArrival(ctx context.Context, id string) error {
	a.ls.mu.Lock()
	ch := a.arriving[id]
	a.ls.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return berth.WrapError(berth.EUnavailable, ctx.Err(), "question %s is still being recorded", id)
	}
}

// recover takes the questions a reattached session's previous daemon
// stored pending, for the agent's requests served again to take back.
func (a *asks) recover(perms []*berth.Permission, elics []*berth.Elicitation) {
	ls := a.ls
	for _, p := range perms {
		a.adoptable = append(a.adoptable, *p)
	}
	for _, e := range elics {
		a.adoptableElics = append(a.adoptableElics, *e)
	}
	ls.sess.PendingPermissions, ls.sess.PendingElicitations = 0, 0
}

// beginRecord writes the record of a question the agent asked (create),
// and on success returns holding recordMu (read) until the question's
// event is logged: a detach waits for the pair. Nothing is recorded (it
// returns false, holding nothing) once the daemon let go of the agent,
// which the next daemon asks, or when the store failed.
func (a *asks) beginRecord(what string, create func() error) bool {
	ls := a.ls
	ls.recordMu.RLock()
	if ls.detached.Load() {
		ls.recordMu.RUnlock()
		return false
	}
	if err := create(); err != nil {
		ls.recordMu.RUnlock()
		ls.logger.Error("store "+what, "err", err)
		return false
	}
	return true
}

// movedOnLocked reports whether the session moved on while the record of
// a question of turn turnID (tagged tag) was written: a stop, the end of
// the turn or its cancel answers the question at once.
func (a *asks) movedOnLocked(turnID, tag string) bool {
	ls := a.ls
	return ls.exited || ls.stopReason != "" || (turnID != "" && tag == "") ||
		(ls.turns.cur != nil && ls.turns.cur.id == turnID && ls.turns.cur.cancelRequested)
}

// turnTagLocked is the turn id an event about turnID carries: turnID while
// that turn is in flight, "" once it has ended (turn_ended stays the
// turn's last event).
func (a *asks) turnTagLocked(turnID string) string {
	if t := a.ls.turns.cur; t != nil && t.id == turnID {
		return turnID
	}
	return ""
}

// flushBeforeAnswer waits until a question's events are committed: once
// the agent has its answer, a daemon that dies cannot lose them (the shim
// counts the request answered and never has it served again).
func (a *asks) flushBeforeAnswer(ctx context.Context) {
	ls := a.ls
	if ls.shim == nil {
		return
	}
	if err := ls.h.Log.FlushSession(context.WithoutCancel(ctx), ls.id); err != nil {
		ls.logger.Warn("flush before answering the agent", "err", err)
	}
}

// endedAsks are the questions of a turn that ended: those resolved
// cancelled, whose records and answers are still to go, and those a
// previous daemon stored that the agent never asked again.
type endedAsks struct {
	perms      []*berth.Permission
	permsW     []*permWaiter
	stalePerms []berth.Permission
	elics      []*berth.Elicitation
	elicsW     []*elicWaiter
	staleElics []berth.Elicitation
}

// endTurnLocked resolves, cancelled, the questions of turn turnID, which
// is ending, and drops those a previous daemon stored that the agent never
// asked again, logging them all resolved before turn_ended; finishTurn
// records them once mu is released.
func (a *asks) endTurnLocked(turnID string) endedAsks {
	var out endedAsks
	out.perms, out.permsW = a.resolveTurnLocked(turnID)
	out.stalePerms = a.dropAdoptableLocked(turnID)
	out.elics, out.elicsW = a.resolveTurnElicitationsLocked(turnID)
	out.staleElics = a.dropAdoptableElicsLocked(turnID)
	return out
}

// finishTurn records the questions of a turn that ended and answers the
// agent. The caller holds recordMu (read), as it did when their events
// were logged: the records are written before a detach lets go of the
// agent.
func (a *asks) finishTurn(ended endedAsks) {
	ls := a.ls
	ctx := context.Background()
	for i, p := range ended.perms {
		a.complete(ctx, p, ended.permsW[i])
	}
	for i, e := range ended.elics {
		a.completeElicitation(ctx, e, ended.elicsW[i])
	}
	now := time.Now().UTC()
	for i := range ended.stalePerms {
		p := &ended.stalePerms[i]
		p.State, p.DecidedBy, p.DecidedAt = berth.PermissionCanceled, berth.DecidedByCancel, &now
		if err := ls.h.Store.DecidePermission(ctx, p); err != nil && !berth.IsCode(err, berth.EConflict) {
			ls.logger.Warn("cancel a stale permission", "err", err)
		}
	}
	for i := range ended.staleElics {
		e := &ended.staleElics[i]
		e.State, e.Action, e.DecidedBy, e.ResolvedAt = berth.ElicitationCancelled, berth.ElicitationCancel, berth.DecidedByCancel, &now
		if err := ls.h.Store.ResolveElicitation(ctx, e); err != nil && !berth.IsCode(err, berth.EConflict) {
			ls.logger.Warn("cancel a stale elicitation", "err", err)
		}
	}
}

// cancelLocked answers every waiting question of the session cancelled.
// The answers go out on their own goroutines: the records are written
// outside mu.
func (a *asks) cancelLocked() {
	ls := a.ls
	for id := range a.perms {
		ls.wg.Add(1)
		go func() {
			defer ls.wg.Done()
			_, _ = a.decide(context.Background(), id, berth.PermissionCanceled, "", berth.DecidedByCancel)
		}()
	}
	for id := range a.elics {
		ls.wg.Add(1)
		go func() {
			defer ls.wg.Done()
			_, _ = a.resolveElicitation(context.Background(), id, berth.ElicitationCancel, nil, berth.DecidedByCancel)
		}()
	}
}

// stopTimersLocked stops the timers that would decide a permission on
// behalf of a daemon that let go of the agent.
func (a *asks) stopTimersLocked() {
	ls := a.ls
	for _, w := range a.perms {
		if w.timer != nil && w.timer.Stop() {
			ls.wg.Done()
			w.timer = nil
		}
	}
}
