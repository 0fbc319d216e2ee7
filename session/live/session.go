package live

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// Session is one live session: its agent process, ACP connection, current
// turn and the goroutines that serve it. The monitor goroutine is the only
// one that finalises the session (moves it to stopped). It reaches whoever
// owns the set of sessions only through its Host (host.go).
//
// Its locks and what each guards are declared below, after the one line
// that orders them. Three kinds of wait happen under mu, on purpose:
//   - store calls: saveLocked writes the session while ls.sess moves with
//     it, and the queue's claims, enqueues and cancels (queue.go) write
//     while the queue's counters in ls.sess move with them, so two callers
//     never claim one entry nor see a count the store does not have. It is safe: the store never calls back into a
//     live session, and a slow store stalls this session alone.
//   - the commit of turn_started: turns.logStartedLocked waits for it under
//     mu, so the agent is prompted only once the log has the turn. It is
//     safe for the reason below.
//   - event-log back-pressure: emit called under mu may wait in
//     eventlog.Log.Append for room (the queue bound and the session's
//     byte budget), so that an event stays ordered against the turn
//     boundaries mu orders. It is safe: the log's writer, which makes the
//     room, never takes mu; and the wait is this session's own (its byte
//     budget) or the whole log's.
type Session struct {
	// Set by New, never changed.
	h         *Host // the seam to the manager (host.go)
	id        string
	logger    *slog.Logger
	spec      berth.AgentSpec
	workspace string

	// Lock order: conversation.authMu > controls.mu > Session.recordMu > Session.mu > box.mu > terminals.mu > capBuffer.mu
	// A lock is taken holding none that comes after it, and no Host
	// callback is called holding any (lockorder_test.go checks every
	// path). The components' locks are declared with what they guard;
	// the Hush's count (internal/inflight) locks last, taking no other.

	// recordMu pairs a stored record with its event: a request holds it
	// (read) from its store write to its event, and detach takes it
	// (write) before setting detached, so the next daemon never adopts a
	// record whose event this one dropped.
	recordMu sync.RWMutex
	// mu guards the fields below, up to detached, and the components'
	// fields their comments say it guards. Events that must stay ordered
	// against turn boundaries are enqueued while it is held.
	mu         sync.Mutex
	sess       berth.Session
	stopReason berth.StopReason
	failure    *berth.Failure
	// exited is set once the agent process is gone: from then on nothing
	// starts (turns, stops) and the monitor alone finishes the session.
	exited bool
	// rewinding is set while Rewind restores the workspace: no input is
	// taken meanwhile.
	rewinding bool
	// published is the Session JSON last published on the all-sessions
	// stream (see changes.go).
	published []byte
	// shim is the agent's shim, when it runs in one (set under mu once
	// live: the supervisor may look).
	shim *shim.Proc
	// acked is what AckSpool last told the shim (the supervisor's own).
	acked spoolAck

	// detached is set when the daemon lets go of an agent that runs on in
	// its shim (a graceful shutdown): from then on the live session records
	// nothing, and the next daemon carries on.
	detached atomic.Bool
	// leaseLost is set when the store refused a write because another
	// node holds the session's lease: the manager is told once no lock is
	// held (unlock, tellLeaseLost), never under one.
	leaseLost atomic.Bool

	// proc, client and terminals are set by wire before ready is closed;
	// whoever may run before it (stop) waits for ready.
	proc      berth.Process
	client    *acp.Client
	terminals *terminals
	// wg counts cancel-grace timers and terminal waiters; turnWG the turn
	// runners (and out.stderrWG the stderr reader). The monitor waits for
	// them all before it logs session_stopped.
	wg     sync.WaitGroup
	turnWG sync.WaitGroup

	// The components: each owns its fields, and reaches the session
	// through its back-pointer.
	life     lifecycle    // lifecycle.go
	conv     conversation // auth.go, start.go, clear.go
	turns    turns        // turn.go
	queue    queue        // queue.go
	asks     asks         // asks.go, permission.go, elicitation.go
	out      output       // output.go
	controls controls     // controls.go, patch.go
	files    files        // fs.go, fswalk.go
	box      box          // box.go
	tree     tree         // children.go
}

// ID is the session's id.
func (ls *Session) ID() string { return ls.id }

// Logger is the session's logger.
func (ls *Session) Logger() *slog.Logger { return ls.logger }

// View returns a copy of the session as the API shows it.
func (ls *Session) View() *berth.Session {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.viewLocked()
}

func (ls *Session) viewLocked() *berth.Session {
	s := ls.sess
	if seq := ls.h.Log.LastSeq(ls.id); seq > s.LastSeq {
		s.LastSeq = seq
	}
	if ls.turns.cur != nil {
		s.CurrentTurnID = ls.turns.cur.id
	} else {
		s.CurrentTurnID = ""
	}
	s.Badge = s.ComputeBadge(ls.turns.cur != nil, ls.turns.hung)
	if ls.h.InCluster {
		s.Node = ls.h.NodeID
	}
	return &s
}

// save writes a change that keeps the state. Patch calls it holding its
// controls lock: the caller tells of a lease lost (tellLeaseLost).
func (ls *Session) save(ctx context.Context, mutate func(*berth.Session)) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.saveLocked(ctx, ls.sess.State, mutate)
}

// saveLocked writes a change of the session, guarded by its stored state
// being from, and then takes it. The store is called under mu (see
// Session): what the session is and what is stored move as one. A write
// refused for a lease another node holds is told to the manager once no
// lock is held (unlock, tellLeaseLost).
func (ls *Session) saveLocked(ctx context.Context, from berth.State, mutate func(*berth.Session)) error {
	next := ls.sess
	mutate(&next)
	next.UpdatedAt = time.Now().UTC()
	next.Resumable = Resumable(&next, false)
	next.Badge = next.ComputeBadge(ls.turns.cur != nil, ls.turns.hung)
	if err := ls.h.Store.UpdateSession(ctx, &next, from); err != nil {
		if berth.IsCode(err, berth.ELeaseLost) {
			ls.leaseLost.Store(true)
		}
		return err
	}
	ls.sess = next
	ls.changedLocked()
	return nil
}

// unlock releases mu, then tells the manager of a lease lost meanwhile.
// Only a path that holds no other lock of the session releases mu this
// way; one that does calls tellLeaseLost once it has released them all.
func (ls *Session) unlock() {
	ls.mu.Unlock()
	ls.tellLeaseLost()
}

// tellLeaseLost tells the manager, once, of a lease lost while the caller
// held its locks (Host.LeaseLost is a callback); it holds none now.
func (ls *Session) tellLeaseLost() {
	if ls.leaseLost.CompareAndSwap(true, false) {
		ls.h.LeaseLost(ls.id)
	}
}

// Emit enqueues one event; the log assigns its seq and persists it before
// anyone can read it.
func (ls *Session) Emit(turnID, typ string, data any) {
	ls.emitEvent(berth.NewEvent(ls.id, turnID, typ, data))
}

// emitFrom is emit for an event caused by the agent's stdout line that is
// being dispatched: the event carries the line's end (see berth.Event.Source).
// Only the ACP reader goroutine calls it.
func (ls *Session) emitFrom(src int64, turnID, typ string, data any) {
	ev := berth.NewEvent(ls.id, turnID, typ, data)
	ev.Source = src
	ls.emitEvent(ev)
}

// emitEvent hands ev to the log. Called under mu it may wait for the log's
// room (see Session): the log's writer never takes mu.
func (ls *Session) emitEvent(ev berth.Event) {
	if ls.detached.Load() {
		// The next daemon replays whatever this one did not record.
		return
	}
	if err := ls.h.Log.Append(context.Background(), ev); err != nil {
		ls.logger.Error("event not logged", "type", ev.Type, "err", err)
	}
}

// Stop stops the agent (SIGTERM to its group, grace, SIGKILL, reap) and
// waits until the monitor has finalised the session. Idempotent.
//
// A stop of a resuming session waits for the resume's handshake to end
// (at most limits.handshake_timeout) before it acts: interrupting it would
// log a second session_stopped with no session_started since the first.
// Serialised this way, a stop racing a resume sees it active and stops it
// (session_started, then session_stopped), or sees it failed and stopped.
func (ls *Session) Stop(ctx context.Context, reason berth.StopReason, failure *berth.Failure) {
	if ls.conv.resumed {
		select {
		case <-ls.life.handshook:
		case <-ctx.Done():
			return
		}
	}
	ls.life.requestStop(reason, failure)
	if err := ls.life.transition(ctx, berth.StateStopping, nil); err != nil && !berth.IsCode(err, berth.EConflict) {
		ls.logger.Warn("could not record stopping", "err", err)
	}
	// The agent may not be started yet: once it is, start sees the stop.
	select {
	case <-ls.life.ready:
	case <-ctx.Done():
		return
	}
	if ls.proc != nil {
		if _, err := ls.proc.Stop(ctx, ls.h.Limits.StopGrace); err != nil {
			ls.logger.Warn("agent stop", "err", err)
		}
	}
	select {
	case <-ls.life.finished:
	case <-ctx.Done():
	}
}
