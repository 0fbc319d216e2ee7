package session

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/ids"
)

// The input side of a session (CONTRACT §4.2). Every pending entry lives in
// the store first; the runtime keeps only what it needs to decide quickly:
// the pending count, the staged steer and the input generation (in
// rt.sess.Queue). All of it is guarded by rt.mu, so a dispatch and an
// interrupt never interleave.

// queuedData is the data of prompt_queued.
type queuedData struct {
	EntryID    string `json:"entry_id"`
	Kind       string `json:"kind"`
	Position   int    `json:"position"`
	Generation int64  `json:"generation"`
	Text       string `json:"text"`
	// Content is the prompt's blocks when it was sent as content.
	Content []berth.ContentBlock `json:"content,omitempty"`
}

// entryData is the data of prompt_canceled and prompt_steered.
type entryData struct {
	EntryID string `json:"entry_id"`
	Reason  string `json:"reason,omitempty"`
	Text    string `json:"text,omitempty"`
	// Content is a steer's blocks when it was sent as content.
	Content []berth.ContentBlock `json:"content,omitempty"`
}

// Why an entry was canceled.
const (
	cancelReplaced    = "replaced"
	cancelInterrupted = "interrupted"
	cancelByUser      = "user"
	cancelTurnEnded   = "turn_cancelled"
)

// Prompt implements berth.SessionService: an idle session starts a turn, a
// busy one queues, interrupts or steers, and a stopped resumable one is
// resumed first.
func (m *Manager) Prompt(ctx context.Context, id string, req berth.PromptRequest) (*berth.PromptResult, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := req.Validate(m.opts.Limits.MaxPromptBytes); err != nil {
		return nil, err
	}
	rt := m.runtimeOf(id)
	if rt != nil && rt.gone() {
		// Its agent has exited and the session is being closed: once it is
		// stopped, it can be resumed.
		select {
		case <-rt.done():
		case <-ctx.Done():
			return nil, berth.WrapError(berth.EUnavailable, ctx.Err(), "session still stopping")
		}
		rt = nil
	}
	if rt == nil && req.Content != nil {
		// What the agent said it takes is kept while it is stopped: a
		// prompt it cannot take does not resume it.
		s, err := m.store.GetSession(ctx, id)
		if err != nil {
			return nil, err
		}
		if len(s.ACP.Capabilities) > 0 {
			if err := checkCapabilities(req.Content, acp.PromptCapabilitiesOf(s.ACP.Capabilities)); err != nil {
				return nil, err
			}
		}
	}
	if rt == nil {
		if req.Mode == berth.ModeSteer {
			if _, err := m.store.GetSession(ctx, id); err != nil {
				return nil, err
			}
			return nil, berth.Errorf(berth.EConflict, "steer needs a turn in flight; the session is stopped")
		}
		if _, err := m.ResumeSession(ctx, id); err != nil {
			return nil, err
		}
		if rt = m.runtimeOf(id); rt == nil {
			return nil, berth.Errorf(berth.EConflict, "the session stopped while it resumed")
		}
	}
	if err := rt.awaitHandshake(ctx); err != nil {
		return nil, err
	}
	in, err := rt.resolveInput(ctx, req)
	if err != nil {
		return nil, err
	}
	return rt.prompt(ctx, req.Mode, in)
}

// queueGeneration is the session's input generation.
func (rt *runtime) queueGeneration() int64 {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.sess.Queue.Generation
}

// cancelEntry cancels the pending entry entryID; done is false when the
// agent is gone (the session is being closed: the stored entry is the
// manager's to cancel once it is stopped).
func (rt *runtime) cancelEntry(ctx context.Context, entryID string) (done bool, err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.exited {
		return false, nil
	}
	return true, rt.cancelEntryLocked(ctx, entryID)
}

// outcome says what became of the recent entry entryID (ok false: not
// known yet), and a channel closed when the next outcome is known.
func (rt *runtime) outcome(entryID string) (o entryOutcome, ok bool, changed <-chan struct{}) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	o, ok = rt.outcomes[entryID]
	return o, ok, rt.inputChanged
}

// done is closed once the session is stopped and torn down.
func (rt *runtime) done() <-chan struct{} { return rt.finished }

// gone reports whether the agent has exited.
func (rt *runtime) gone() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.exited
}

// awaitHandshake waits until a starting session is active or stopped.
func (rt *runtime) awaitHandshake(ctx context.Context) error {
	select {
	case <-rt.handshook:
		return nil
	case <-ctx.Done():
		return berth.WrapError(berth.EUnavailable, ctx.Err(), "session still starting")
	}
}

// prompt takes one prompt by the session's state and the prompt's mode.
func (rt *runtime) prompt(ctx context.Context, mode string, in input) (*berth.PromptResult, error) {
	ctx = context.WithoutCancel(ctx)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err := rt.acceptingLocked(); err != nil {
		return nil, err
	}
	if rt.turn == nil {
		// Input left waiting (a failed claim) goes first.
		rt.dispatchLocked(ctx)
	}
	// Pending entries or a staged steer make the session busy even between
	// turns: a new prompt never overtakes what was accepted before it.
	busy := rt.turn != nil || rt.sess.Queue.Pending > 0 || rt.steer != nil
	switch {
	case !busy && mode == berth.ModeSteer:
		return nil, berth.Errorf(berth.EConflict, "steer needs a turn in flight; the session is idle")
	case !busy:
		turnID := rt.startTurnLocked(ids.New("turn"), in, berth.SourceUser)
		return &berth.PromptResult{Status: "started", TurnID: turnID}, nil
	case mode == berth.ModeSteer:
		return rt.stageSteerLocked(ctx, in)
	case mode == berth.ModeInterrupt:
		return rt.interruptLocked(ctx, in)
	}
	return rt.enqueueLocked(ctx, in)
}

// acceptingLocked says whether the session can take input now.
func (rt *runtime) acceptingLocked() error {
	if rt.sess.State == berth.StateStarting && rt.sess.NeedsAuth && rt.stopReason == "" && !rt.exited {
		return &berth.Error{Code: berth.EConflict, Message: "the agent needs authentication first: POST /v1/sessions/" + rt.id + "/authenticate with one of acp.auth_methods",
			Details: map[string]any{"badge": berth.BadgeNeedsAuth}}
	}
	if rt.clearing && rt.sess.State == berth.StateActive {
		return berth.Errorf(berth.EConflict, "the session's conversation is being cleared")
	}
	if rt.sess.State != berth.StateActive || rt.stopReason != "" || rt.exited {
		return berth.Errorf(berth.EConflict, "session is %s", rt.sess.State)
	}
	if rt.detached.Load() {
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	if rt.rewinding {
		return berth.Errorf(berth.EConflict, "the workspace is being rewound")
	}
	return nil
}

// headEntryLocked returns the oldest pending queue entry of generation
// gen (the one ClaimQueueEntry claims next), or nil. It reads the store
// under mu (see runtime).
func (rt *runtime) headEntryLocked(ctx context.Context, gen int64) (*berth.QueueEntry, error) {
	entries, err := rt.h.store.ListQueue(ctx, rt.id)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Kind == berth.EntryQueue && e.Generation == gen {
			return e, nil
		}
	}
	return nil, nil
}

// abandonTurnLocked closes a turn that was logged but whose entry could
// not be claimed: it never ran.
func (rt *runtime) abandonTurnLocked(turnID string, err error) {
	rt.logger.Warn("a logged turn did not get its entry", "turn_id", turnID, "err", err)
	rt.emit(turnID, berth.EventTurnEnded, turnEndedData{StopReason: berth.TurnCancelled,
		Error: &berth.ACPError{Code: "not_dispatched", Message: "the queued prompt could not be claimed"}})
}

// entryPrefix begins the id of every queue entry.
const entryPrefix = "entry_"

// newEntry builds a pending entry of the current generation.
func (rt *runtime) newEntry(kind string, in input) *berth.QueueEntry {
	return &berth.QueueEntry{ID: ids.New("entry"), SessionID: rt.id, Kind: kind, Text: in.text, Content: in.content,
		Generation: rt.sess.Queue.Generation, CreatedAt: time.Now().UTC()}
}

// enqueueLocked stores a prompt behind the turn in flight. The store is
// written under mu (see runtime): the pending count moves with it.
func (rt *runtime) enqueueLocked(ctx context.Context, in input) (*berth.PromptResult, error) {
	e := rt.newEntry(berth.EntryQueue, in)
	res, err := rt.h.store.EnqueuePrompt(ctx, e, rt.h.limits.MaxQueue)
	if err != nil {
		return nil, err
	}
	rt.sess.Queue.Pending++
	rt.changedLocked()
	rt.emit("", berth.EventPromptQueued, queuedData{EntryID: e.ID, Kind: e.Kind, Position: res.Position,
		Generation: e.Generation, Text: e.Text, Content: e.Content})
	return &berth.PromptResult{Status: "queued", EntryID: e.ID, Position: res.Position, Generation: e.Generation}, nil
}

// stageSteerLocked stages a text for the turn in flight, replacing a staged
// one. The store is written under mu (see runtime): rt.steer moves with it.
func (rt *runtime) stageSteerLocked(ctx context.Context, in input) (*berth.PromptResult, error) {
	e := rt.newEntry(berth.EntrySteer, in)
	res, err := rt.h.store.EnqueuePrompt(ctx, e, 0)
	if err != nil {
		return nil, err
	}
	if res.Replaced != "" {
		rt.noteEntryLocked(res.Replaced, entryOutcome{canceled: true})
		rt.emit("", berth.EventPromptCanceled, entryData{EntryID: res.Replaced, Reason: cancelReplaced})
	}
	rt.steer = e
	rt.emit("", berth.EventPromptQueued, queuedData{EntryID: e.ID, Kind: e.Kind, Position: 1,
		Generation: e.Generation, Text: e.Text, Content: e.Content})
	if rt.turn != nil && rt.out.turnID == rt.turn.id && rt.out.truncated {
		// Past the turn's cap no tool-call boundary is seen any more: the
		// steer goes in now.
		rt.deliverSteerLocked(rt.turn)
	}
	return &berth.PromptResult{Status: "staged", EntryID: e.ID}, nil
}

// interruptLocked cancels the turn in flight and every pending entry, moves
// the session to a new input generation and starts text as soon as the
// cancelled turn has ended. The text is itself stored as the first entry of
// the new generation, so a restart before it starts does not lose it. The
// store is written under mu (see runtime): the generation moves with it.
func (rt *runtime) interruptLocked(ctx context.Context, in input) (*berth.PromptResult, error) {
	gen := rt.sess.Queue.Generation + 1
	canceled, err := rt.h.store.CancelQueue(ctx, rt.id, gen)
	if err != nil {
		return nil, err
	}
	// What the store canceled is gone whatever happens next.
	rt.steer, rt.next, rt.sess.Queue.Pending = nil, nil, 0
	for _, e := range canceled {
		rt.noteEntryLocked(e.ID, entryOutcome{canceled: true})
		rt.emit("", berth.EventPromptCanceled, entryData{EntryID: e.ID, Reason: cancelInterrupted})
	}
	if err := rt.saveLocked(ctx, rt.sess.State, func(s *berth.Session) {
		s.Queue = berth.QueueInfo{Generation: gen}
	}); err != nil {
		return nil, err
	}
	n := len(canceled)
	res := &berth.PromptResult{Status: "started", CanceledEntries: &n, Generation: gen}
	turnID := ids.New("turn")
	if t := rt.turn; t != nil {
		e := rt.newEntry(berth.EntryQueue, in)
		if _, err := rt.h.store.EnqueuePrompt(ctx, e, rt.h.limits.MaxQueue); err != nil {
			return nil, err
		}
		rt.sess.Queue.Pending++
		rt.changedLocked()
		rt.next = &nextTurn{entryID: e.ID, turnID: turnID}
		res.InterruptedTurnID = t.id
		rt.cancelTurnLocked(t)
	} else {
		rt.startTurnLocked(turnID, in, berth.SourceUser)
	}
	res.TurnID = turnID
	return res, nil
}

// nextTurn is an interrupt's text waiting for the cancelled turn to end:
// its entry runs first, under the turn id the interrupt already answered.
type nextTurn struct {
	entryID string
	turnID  string
}

// dispatchLocked starts the next input once the session is idle: a staged
// steer first, then the oldest queue entry of the current generation.
// Claiming is atomic in the store, so an entry runs at most once; it is
// done under mu (see runtime), so the turn it starts is the only one.
func (rt *runtime) dispatchLocked(ctx context.Context) {
	if rt.turn != nil || rt.acceptingLocked() != nil {
		return
	}
	gen := rt.sess.Queue.Generation
	// An interrupt's text runs before a steer staged after it. Each turn is
	// logged before its entry is claimed (see logTurnStartedLocked): a
	// daemon that dies in between finds the turn with its entry still
	// pending, and claims it then (reattach).
	if rt.steer != nil && rt.next == nil {
		turnID := ids.New("turn")
		e0 := rt.steer
		if err := rt.logTurnStartedLocked(turnID, turnStartedData{Text: e0.Text, Content: e0.Content, Source: berth.SourceSteer, EntryID: e0.ID}); err != nil {
			rt.logger.Error("turn_started not logged", "err", err)
			rt.retryDispatchLocked()
			return
		}
		rt.steer = nil
		e, err := rt.h.store.ClaimQueueEntry(ctx, rt.id, berth.EntrySteer, gen, turnID)
		if err == nil {
			rt.noteEntryLocked(e.ID, entryOutcome{turnID: turnID})
			rt.beginTurnLocked(turnID, entryInput(e))
			return
		}
		rt.abandonTurnLocked(turnID, err)
		if !berth.IsCode(err, berth.ENotFound) {
			rt.steer = e0
			rt.retryDispatchLocked()
			return
		}
	}
	for rt.sess.Queue.Pending > 0 {
		head, err := rt.headEntryLocked(ctx, gen)
		if err != nil {
			rt.logger.Error("read the queue", "err", err)
			rt.retryDispatchLocked()
			return
		}
		if head == nil {
			// Nothing of this generation is claimable: recount from the store.
			rt.recountLocked(ctx)
			return
		}
		turnID, source := ids.New("turn"), berth.SourceQueue
		if rt.next != nil && rt.next.entryID == head.ID {
			turnID, source = rt.next.turnID, berth.SourceUser
		}
		if err := rt.logTurnStartedLocked(turnID, turnStartedData{Text: head.Text, Content: head.Content, Source: source, EntryID: head.ID}); err != nil {
			rt.logger.Error("turn_started not logged", "err", err)
			rt.retryDispatchLocked()
			return
		}
		e, err := rt.h.store.ClaimQueueEntry(ctx, rt.id, berth.EntryQueue, gen, turnID)
		if err == nil && e.ID != head.ID {
			err = berth.Errorf(berth.EInternal, "claimed %s, not the head of the queue %s", e.ID, head.ID)
		}
		if err != nil {
			rt.abandonTurnLocked(turnID, err)
			if berth.IsCode(err, berth.ENotFound) {
				rt.recountLocked(ctx)
				return
			}
			rt.logger.Error("claim queued prompt", "err", err)
			rt.retryDispatchLocked()
			return
		}
		rt.dispatchRetries = 0
		rt.sess.Queue.Pending--
		if rt.next != nil && rt.next.entryID == e.ID {
			rt.next = nil
		}
		rt.noteEntryLocked(e.ID, entryOutcome{turnID: turnID})
		rt.beginTurnLocked(turnID, entryInput(e))
		return
	}
}

// retryDispatchLocked tries the dispatch again later, backing off from
// 100 ms to 5 s, after the store failed a claim: without it the entries
// would wait for an event that may never come.
func (rt *runtime) retryDispatchLocked() {
	if rt.exited || rt.retryPending {
		return
	}
	delay := min(100*time.Millisecond<<min(rt.dispatchRetries, 6), 5*time.Second)
	rt.dispatchRetries++
	rt.retryPending = true
	rt.wg.Add(1)
	time.AfterFunc(delay, func() {
		defer rt.wg.Done()
		rt.mu.Lock()
		defer rt.mu.Unlock()
		rt.retryPending = false
		rt.dispatchLocked(context.Background())
	})
}

// recountLocked sets the pending count from the store, after a claim found
// nothing where the count said there was something. It reads the store
// under mu (see runtime).
func (rt *runtime) recountLocked(ctx context.Context) {
	entries, err := rt.h.store.ListQueue(ctx, rt.id)
	if err != nil {
		rt.logger.Warn("recount queue", "err", err)
		return
	}
	n := 0
	for _, e := range entries {
		if e.Kind == berth.EntryQueue && e.Generation == rt.sess.Queue.Generation {
			n++
		}
	}
	if n == rt.sess.Queue.Pending {
		// A concurrent transaction held the entry: leave the count as it is
		// for the next dispatch rather than spin.
		rt.logger.Warn("queued prompt not claimable now; retrying", "pending", n)
		rt.retryDispatchLocked()
		return
	}
	rt.sess.Queue.Pending = n
	rt.changedLocked()
	if n == 0 {
		rt.next = nil
	}
}

// ListQueue implements berth.SessionService.
func (m *Manager) ListQueue(ctx context.Context, id string) (*berth.QueueView, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	entries, err := m.store.ListQueue(ctx, id)
	if err != nil {
		return nil, err
	}
	if entries == nil {
		entries = []*berth.QueueEntry{}
	}
	var gen int64
	if rt := m.runtimeOf(id); rt != nil {
		gen = rt.queueGeneration()
	} else {
		s, err := m.store.GetSession(ctx, id)
		if err != nil {
			return nil, err
		}
		gen = s.Queue.Generation
	}
	return &berth.QueueView{Entries: entries, Generation: gen}, nil
}

// CancelQueueEntry implements berth.SessionService. For a stopped session
// the drop is recorded in the store only: its log is closed by
// session_stopped.
func (m *Manager) CancelQueueEntry(ctx context.Context, id, entryID string) error {
	if err := m.awaitBoot(ctx, id); err != nil {
		return err
	}
	if rt := m.runtimeOf(id); rt != nil {
		if done, err := rt.cancelEntry(context.WithoutCancel(ctx), entryID); done {
			return err
		}
		// The agent is gone and the session is being closed: wait for it.
		select {
		case <-rt.done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var e *berth.QueueEntry
	var s *berth.Session
	err := m.leased(ctx, id, func() error {
		var err error
		if e, err = m.store.CancelQueueEntry(ctx, id, entryID); err != nil {
			return err
		}
		s, err = m.store.GetSession(ctx, id)
		if err != nil || s.State != berth.StateStopped || e.Kind != berth.EntryQueue || s.Queue.Pending == 0 {
			s = nil
			return nil
		}
		s.Queue.Pending--
		return m.store.UpdateSession(ctx, s, berth.StateStopped)
	})
	if s == nil && err == nil {
		return nil
	}
	if err != nil && s == nil {
		return err
	}
	if err != nil {
		if !berth.IsCode(err, berth.EConflict) {
			m.logger.Warn("record the queue count", "session_id", id, "err", err)
		}
		return nil
	}
	m.publishStored(berth.ChangeSessionUpdated, m.stored(s))
	return nil
}

// cancelEntryLocked drops one pending entry of a live session. The store
// is written under mu (see runtime): the pending count moves with it.
func (rt *runtime) cancelEntryLocked(ctx context.Context, entryID string) error {
	e, err := rt.h.store.CancelQueueEntry(ctx, rt.id, entryID)
	if err != nil {
		return err
	}
	switch {
	case e.Kind == berth.EntrySteer:
		rt.steer = nil
	case rt.sess.Queue.Pending > 0:
		rt.sess.Queue.Pending--
		rt.changedLocked()
	}
	if rt.next != nil && rt.next.entryID == e.ID {
		rt.next = nil
	}
	rt.noteEntryLocked(e.ID, entryOutcome{canceled: true})
	rt.emit("", berth.EventPromptCanceled, entryData{EntryID: e.ID, Reason: cancelByUser})
	return nil
}

// entryOutcome is what became of an entry: the turn that ran it, or canceled.
type entryOutcome struct {
	turnID   string
	canceled bool
}

// maxOutcomes bounds the entry outcomes a runtime remembers for waiters.
const maxOutcomes = 256

// noteEntryLocked records what became of an entry and wakes its waiters.
func (rt *runtime) noteEntryLocked(id string, o entryOutcome) {
	rt.outcomes[id] = o
	rt.outcomeIDs = append(rt.outcomeIDs, id)
	if len(rt.outcomeIDs) > maxOutcomes {
		delete(rt.outcomes, rt.outcomeIDs[0])
		rt.outcomeIDs = rt.outcomeIDs[1:]
	}
	close(rt.inputChanged)
	rt.inputChanged = make(chan struct{})
}

// waitEntry waits until a queued or staged prompt has run and returns its
// turn's result. EConflict when it was canceled or the session stopped
// before it ran.
func (m *Manager) waitEntry(ctx context.Context, id, entryID string) (*berth.TurnResult, error) {
	for {
		rt := m.runtimeOf(id)
		if rt == nil {
			if _, err := m.store.GetSession(ctx, id); err != nil {
				return nil, err
			}
			return nil, berth.Errorf(berth.EConflict, "the session stopped before prompt %s ran; it stays queued", entryID)
		}
		o, ok, changed := rt.outcome(entryID)
		switch {
		case ok && o.canceled:
			return nil, berth.Errorf(berth.EConflict, "prompt %s was canceled before it ran", entryID)
		case ok:
			return m.WaitTurn(ctx, id, o.turnID)
		}
		select {
		case <-changed:
		case <-rt.done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
