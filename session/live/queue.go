package live

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// The input side of a session (docs/api.md, Prompts). Every pending entry lives in
// the store first; the live session keeps only what it needs to decide quickly:
// the pending count, the staged steer and the input generation (in
// ls.sess.Queue). All of it is guarded by ls.mu, so a dispatch and an
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

// EntryData is the data of prompt_canceled and prompt_steered.
type EntryData struct {
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

// QueueGeneration is the session's input generation.
func (ls *Session) QueueGeneration() int64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.sess.Queue.Generation
}

// CancelEntry cancels the pending entry entryID; done is false when the
// agent is gone (the session is being closed: the stored entry is the
// manager's to cancel once it is stopped).
func (ls *Session) CancelEntry(ctx context.Context, entryID string) (done bool, err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.exited {
		return false, nil
	}
	return true, ls.cancelEntryLocked(ctx, entryID)
}

// Outcome says what became of the recent entry entryID (ok false: not
// known yet), and a channel closed when the next outcome is known.
func (ls *Session) Outcome(entryID string) (o EntryOutcome, ok bool, changed <-chan struct{}) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	o, ok = ls.outcomes[entryID]
	return o, ok, ls.inputChanged
}

// Done is closed once the session is stopped and torn down.
func (ls *Session) Done() <-chan struct{} { return ls.finished }

// Gone reports whether the agent has exited.
func (ls *Session) Gone() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.exited
}

// AwaitHandshake waits until a starting session is active or stopped.
func (ls *Session) AwaitHandshake(ctx context.Context) error {
	select {
	case <-ls.handshook:
		return nil
	case <-ctx.Done():
		return berth.WrapError(berth.EUnavailable, ctx.Err(), "session still starting")
	}
}

// Prompt takes one prompt by the session's state and the prompt's mode.
func (ls *Session) Prompt(ctx context.Context, mode string, in Input) (*berth.PromptResult, error) {
	ctx = context.WithoutCancel(ctx)
	ls.mu.Lock()
	defer ls.unlock()
	if err := ls.acceptingLocked(); err != nil {
		return nil, err
	}
	if ls.turn == nil {
		// Input left waiting (a failed claim) goes first.
		ls.dispatchLocked(ctx)
	}
	// Pending entries or a staged steer make the session busy even between
	// turns: a new prompt never overtakes what was accepted before it.
	busy := ls.turn != nil || ls.sess.Queue.Pending > 0 || ls.steer != nil
	switch {
	case !busy && mode == berth.ModeSteer:
		return nil, berth.Errorf(berth.EConflict, "steer needs a turn in flight; the session is idle")
	case !busy:
		turnID := ls.startTurnLocked(ids.New("turn"), in, berth.SourceUser)
		return &berth.PromptResult{Status: "started", TurnID: turnID}, nil
	case mode == berth.ModeSteer:
		return ls.stageSteerLocked(ctx, in)
	case mode == berth.ModeInterrupt:
		return ls.interruptLocked(ctx, in)
	}
	return ls.enqueueLocked(ctx, in)
}

// acceptingLocked says whether the session can take input now.
func (ls *Session) acceptingLocked() error {
	if ls.sess.State == berth.StateStarting && ls.sess.NeedsAuth && ls.stopReason == "" && !ls.exited {
		return &berth.Error{Code: berth.EConflict, Message: "the agent needs authentication first: POST /v1/sessions/" + ls.id + "/authenticate with one of acp.auth_methods",
			Details: map[string]any{"badge": berth.BadgeNeedsAuth}}
	}
	if ls.clearing && ls.sess.State == berth.StateActive {
		return berth.Errorf(berth.EConflict, "the session's conversation is being cleared")
	}
	if ls.sess.State != berth.StateActive || ls.stopReason != "" || ls.exited {
		return berth.Errorf(berth.EConflict, "session is %s", ls.sess.State)
	}
	if ls.detached.Load() {
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	if ls.rewinding {
		return berth.Errorf(berth.EConflict, "the workspace is being rewound")
	}
	return nil
}

// headEntryLocked returns the oldest pending queue entry of generation
// gen (the one ClaimQueueEntry claims next), or nil. It reads the store
// under mu (see live session).
func (ls *Session) headEntryLocked(ctx context.Context, gen int64) (*berth.QueueEntry, error) {
	entries, err := ls.h.Store.ListQueue(ctx, ls.id)
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
func (ls *Session) abandonTurnLocked(turnID string, err error) {
	ls.logger.Warn("a logged turn did not get its entry", "turn_id", turnID, "err", err)
	ls.Emit(turnID, berth.EventTurnEnded, TurnEndedData{StopReason: berth.TurnCancelled,
		Error: &berth.ACPError{Code: "not_dispatched", Message: "the queued prompt could not be claimed"}})
}

// newEntry builds a pending entry of the current generation.
func (ls *Session) newEntry(kind string, in Input) *berth.QueueEntry {
	return &berth.QueueEntry{ID: ids.New("entry"), SessionID: ls.id, Kind: kind, Text: in.text, Content: in.content,
		Generation: ls.sess.Queue.Generation, CreatedAt: time.Now().UTC()}
}

// enqueueLocked stores a prompt behind the turn in flight. The store is
// written under mu (see live session): the pending count moves with it.
func (ls *Session) enqueueLocked(ctx context.Context, in Input) (*berth.PromptResult, error) {
	e := ls.newEntry(berth.EntryQueue, in)
	res, err := ls.h.Store.EnqueuePrompt(ctx, e, ls.h.Limits.MaxQueue)
	if err != nil {
		return nil, err
	}
	ls.sess.Queue.Pending++
	ls.changedLocked()
	ls.Emit("", berth.EventPromptQueued, queuedData{EntryID: e.ID, Kind: e.Kind, Position: res.Position,
		Generation: e.Generation, Text: e.Text, Content: e.Content})
	return &berth.PromptResult{Status: "queued", EntryID: e.ID, Position: res.Position, Generation: e.Generation}, nil
}

// stageSteerLocked stages a text for the turn in flight, replacing a staged
// one. The store is written under mu (see live session): ls.steer moves with it.
func (ls *Session) stageSteerLocked(ctx context.Context, in Input) (*berth.PromptResult, error) {
	e := ls.newEntry(berth.EntrySteer, in)
	res, err := ls.h.Store.EnqueuePrompt(ctx, e, 0)
	if err != nil {
		return nil, err
	}
	if res.Replaced != "" {
		ls.noteEntryLocked(res.Replaced, EntryOutcome{Canceled: true})
		ls.Emit("", berth.EventPromptCanceled, EntryData{EntryID: res.Replaced, Reason: cancelReplaced})
	}
	ls.steer = e
	ls.Emit("", berth.EventPromptQueued, queuedData{EntryID: e.ID, Kind: e.Kind, Position: 1,
		Generation: e.Generation, Text: e.Text, Content: e.Content})
	if ls.turn != nil && ls.out.w.turnID == ls.turn.id && ls.out.w.truncated {
		// Past the turn's cap no tool-call boundary is seen any more: the
		// steer goes in now.
		ls.deliverSteerLocked(ls.turn)
	}
	return &berth.PromptResult{Status: "staged", EntryID: e.ID}, nil
}

// interruptLocked cancels the turn in flight and every pending entry, moves
// the session to a new input generation and starts text as soon as the
// cancelled turn has ended. The text is itself stored as the first entry of
// the new generation, so a restart before it starts does not lose it. The
// store is written under mu (see live session): the generation moves with it.
func (ls *Session) interruptLocked(ctx context.Context, in Input) (*berth.PromptResult, error) {
	gen := ls.sess.Queue.Generation + 1
	canceled, err := ls.h.Store.CancelQueue(ctx, ls.id, gen)
	if err != nil {
		return nil, err
	}
	// What the store canceled is gone whatever happens next.
	ls.steer, ls.next, ls.sess.Queue.Pending = nil, nil, 0
	for _, e := range canceled {
		ls.noteEntryLocked(e.ID, EntryOutcome{Canceled: true})
		ls.Emit("", berth.EventPromptCanceled, EntryData{EntryID: e.ID, Reason: cancelInterrupted})
	}
	if err := ls.saveLocked(ctx, ls.sess.State, func(s *berth.Session) {
		s.Queue = berth.QueueInfo{Generation: gen}
	}); err != nil {
		return nil, err
	}
	n := len(canceled)
	res := &berth.PromptResult{Status: "started", CanceledEntries: &n, Generation: gen}
	turnID := ids.New("turn")
	if t := ls.turn; t != nil {
		e := ls.newEntry(berth.EntryQueue, in)
		if _, err := ls.h.Store.EnqueuePrompt(ctx, e, ls.h.Limits.MaxQueue); err != nil {
			return nil, err
		}
		ls.sess.Queue.Pending++
		ls.changedLocked()
		ls.next = &nextTurn{entryID: e.ID, turnID: turnID}
		res.InterruptedTurnID = t.id
		ls.cancelTurnLocked(t)
	} else {
		ls.startTurnLocked(turnID, in, berth.SourceUser)
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
// done under mu (see live session), so the turn it starts is the only one.
func (ls *Session) dispatchLocked(ctx context.Context) {
	if ls.turn != nil || ls.acceptingLocked() != nil {
		return
	}
	gen := ls.sess.Queue.Generation
	// An interrupt's text runs before a steer staged after it. Each turn is
	// logged before its entry is claimed (see logTurnStartedLocked): a
	// daemon that dies in between finds the turn with its entry still
	// pending, and claims it then (reattach).
	if ls.steer != nil && ls.next == nil {
		turnID := ids.New("turn")
		e0 := ls.steer
		if err := ls.logTurnStartedLocked(turnID, TurnStartedData{Text: e0.Text, Content: e0.Content, Source: berth.SourceSteer, EntryID: e0.ID}); err != nil {
			ls.logger.Error("turn_started not logged", "err", err)
			ls.retryDispatchLocked()
			return
		}
		ls.steer = nil
		e, err := ls.h.Store.ClaimQueueEntry(ctx, ls.id, berth.EntrySteer, gen, turnID)
		if err == nil {
			ls.noteEntryLocked(e.ID, EntryOutcome{TurnID: turnID})
			ls.beginTurnLocked(turnID, entryInput(e))
			return
		}
		ls.abandonTurnLocked(turnID, err)
		if !berth.IsCode(err, berth.ENotFound) {
			ls.steer = e0
			ls.retryDispatchLocked()
			return
		}
	}
	for ls.sess.Queue.Pending > 0 {
		head, err := ls.headEntryLocked(ctx, gen)
		if err != nil {
			ls.logger.Error("read the queue", "err", err)
			ls.retryDispatchLocked()
			return
		}
		if head == nil {
			// Nothing of this generation is claimable: recount from the store.
			ls.recountLocked(ctx)
			return
		}
		turnID, source := ids.New("turn"), berth.SourceQueue
		if ls.next != nil && ls.next.entryID == head.ID {
			turnID, source = ls.next.turnID, berth.SourceUser
		}
		if err := ls.logTurnStartedLocked(turnID, TurnStartedData{Text: head.Text, Content: head.Content, Source: source, EntryID: head.ID}); err != nil {
			ls.logger.Error("turn_started not logged", "err", err)
			ls.retryDispatchLocked()
			return
		}
		e, err := ls.h.Store.ClaimQueueEntry(ctx, ls.id, berth.EntryQueue, gen, turnID)
		if err == nil && e.ID != head.ID {
			err = berth.Errorf(berth.EInternal, "claimed %s, not the head of the queue %s", e.ID, head.ID)
		}
		if err != nil {
			ls.abandonTurnLocked(turnID, err)
			if berth.IsCode(err, berth.ENotFound) {
				ls.recountLocked(ctx)
				return
			}
			ls.logger.Error("claim queued prompt", "err", err)
			ls.retryDispatchLocked()
			return
		}
		ls.dispatchRetries = 0
		ls.sess.Queue.Pending--
		if ls.next != nil && ls.next.entryID == e.ID {
			ls.next = nil
		}
		ls.noteEntryLocked(e.ID, EntryOutcome{TurnID: turnID})
		ls.beginTurnLocked(turnID, entryInput(e))
		return
	}
}

// retryDispatchLocked tries the dispatch again later, backing off from
// 100 ms to 5 s, after the store failed a claim: without it the entries
// would wait for an event that may never come.
func (ls *Session) retryDispatchLocked() {
	if ls.exited || ls.retryPending {
		return
	}
	delay := min(100*time.Millisecond<<min(ls.dispatchRetries, 6), 5*time.Second)
	ls.dispatchRetries++
	ls.retryPending = true
	ls.wg.Add(1)
	time.AfterFunc(delay, func() {
		defer ls.wg.Done()
		ls.mu.Lock()
		defer ls.mu.Unlock()
		ls.retryPending = false
		ls.dispatchLocked(context.Background())
	})
}

// recountLocked sets the pending count from the store, after a claim found
// nothing where the count said there was something. It reads the store
// under mu (see live session).
func (ls *Session) recountLocked(ctx context.Context) {
	entries, err := ls.h.Store.ListQueue(ctx, ls.id)
	if err != nil {
		ls.logger.Warn("recount queue", "err", err)
		return
	}
	n := 0
	for _, e := range entries {
		if e.Kind == berth.EntryQueue && e.Generation == ls.sess.Queue.Generation {
			n++
		}
	}
	if n == ls.sess.Queue.Pending {
		// A concurrent transaction held the entry: leave the count as it is
		// for the next dispatch rather than spin.
		ls.logger.Warn("queued prompt not claimable now; retrying", "pending", n)
		ls.retryDispatchLocked()
		return
	}
	ls.sess.Queue.Pending = n
	ls.changedLocked()
	if n == 0 {
		ls.next = nil
	}
}

// cancelEntryLocked drops one pending entry of a live session. The store
// is written under mu (see live session): the pending count moves with it.
func (ls *Session) cancelEntryLocked(ctx context.Context, entryID string) error {
	e, err := ls.h.Store.CancelQueueEntry(ctx, ls.id, entryID)
	if err != nil {
		return err
	}
	switch {
	case e.Kind == berth.EntrySteer:
		ls.steer = nil
	case ls.sess.Queue.Pending > 0:
		ls.sess.Queue.Pending--
		ls.changedLocked()
	}
	if ls.next != nil && ls.next.entryID == e.ID {
		ls.next = nil
	}
	ls.noteEntryLocked(e.ID, EntryOutcome{Canceled: true})
	ls.Emit("", berth.EventPromptCanceled, EntryData{EntryID: e.ID, Reason: cancelByUser})
	return nil
}

// EntryOutcome is what became of an entry: the turn that ran it, or canceled.
type EntryOutcome struct {
	TurnID   string
	Canceled bool
}

// maxOutcomes bounds the entry outcomes a live session remembers for waiters.
const maxOutcomes = 256

// noteEntryLocked records what became of an entry and wakes its waiters.
func (ls *Session) noteEntryLocked(id string, o EntryOutcome) {
	ls.outcomes[id] = o
	ls.outcomeIDs = append(ls.outcomeIDs, id)
	if len(ls.outcomeIDs) > maxOutcomes {
		delete(ls.outcomes, ls.outcomeIDs[0])
		ls.outcomeIDs = ls.outcomeIDs[1:]
	}
	close(ls.inputChanged)
	ls.inputChanged = make(chan struct{})
}
