package live

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// queue is the session's input side (docs/api.md, Prompts): what it
// keeps of the prompts it accepted to decide quickly (the store has each pending entry first,
// and ls.sess.Queue the pending count and the generation), and what
// became of recent entries. The session's mu guards it, so a dispatch and
// an interrupt never interleave.
type queue struct {
	ls *Session
	// steer is the staged steer entry, next the interrupt waiting for the
	// cancelled turn to end.
	steer *berth.QueueEntry
	next  *nextTurn
	// retryPending and dispatchRetries pace dispatch retries after a
	// failed claim.
	retryPending    bool
	dispatchRetries int
	// outcomes says, for recent entries, which turn ran them or that they
	// were canceled; inputChanged is closed and replaced when one is added.
	outcomes     map[string]EntryOutcome
	outcomeIDs   []string
	inputChanged chan struct{}
}

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
	return true, ls.queue.cancelEntryLocked(ctx, entryID)
}

// Outcome says what became of the recent entry entryID (ok false: not
// known yet), and a channel closed when the next outcome is known.
func (ls *Session) Outcome(entryID string) (o EntryOutcome, ok bool, changed <-chan struct{}) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	o, ok = ls.queue.outcomes[entryID]
	return o, ok, ls.queue.inputChanged
}

// Done is closed once the session is stopped and torn down.
func (ls *Session) Done() <-chan struct{} { return ls.life.finished }

// Gone reports whether the agent has exited.
func (ls *Session) Gone() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.exited
}

// AwaitHandshake waits until a starting session is active or stopped.
func (ls *Session) AwaitHandshake(ctx context.Context) error {
	select {
	case <-ls.life.handshook:
		return nil
	case <-ctx.Done():
		return berth.WrapError(berth.EUnavailable, ctx.Err(), "session still starting")
	}
}

// Prompt takes one prompt by the session's state and the prompt's mode.
func (ls *Session) Prompt(ctx context.Context, mode string, in Input) (*berth.PromptResult, error) {
	return ls.queue.prompt(ctx, mode, in)
}

// nextTurn is an interrupt's text waiting for the cancelled turn to end:
// its entry runs first, under the turn id the interrupt already answered.
type nextTurn struct {
	entryID string
	turnID  string
}

// EntryOutcome is what became of an entry: the turn that ran it, or canceled.
type EntryOutcome struct {
	TurnID   string
	Canceled bool
}

// maxOutcomes bounds the entry outcomes a live session remembers for waiters.
const maxOutcomes = 256

// prompt is Prompt.
func (q *queue) prompt(ctx context.Context, mode string, in Input) (*berth.PromptResult, error) {
	ls := q.ls
	ctx = context.WithoutCancel(ctx)
	ls.mu.Lock()
	defer ls.unlock()
	if err := q.acceptingLocked(); err != nil {
		return nil, err
	}
	if ls.turns.cur == nil {
		// Input left waiting (a failed claim) goes first.
		q.dispatchLocked(ctx)
	}
	// Pending entries or a staged steer make the session busy even between
	// turns: a new prompt never overtakes what was accepted before it.
	busy := ls.turns.cur != nil || ls.sess.Queue.Pending > 0 || q.steer != nil
	switch {
	case !busy && mode == berth.ModeSteer:
		return nil, berth.Errorf(berth.EConflict, "steer needs a turn in flight; the session is idle")
	case !busy:
		turnID := ls.turns.startLocked(ids.New("turn"), in, berth.SourceUser)
		return &berth.PromptResult{Status: "started", TurnID: turnID}, nil
	case mode == berth.ModeSteer:
		return q.stageSteerLocked(ctx, in)
	case mode == berth.ModeInterrupt:
		return q.interruptLocked(ctx, in)
	}
	return q.enqueueLocked(ctx, in)
}

// acceptingLocked says whether the session can take input now.
func (q *queue) acceptingLocked() error {
	ls := q.ls
	if ls.sess.State == berth.StateStarting && ls.sess.NeedsAuth && ls.stopReason == "" && !ls.exited {
		return &berth.Error{Code: berth.EConflict, Message: "the agent needs authentication first: POST /v1/sessions/" + ls.id + "/authenticate with one of acp.auth_methods",
			Details: map[string]any{"badge": berth.BadgeNeedsAuth}}
	}
	if ls.conv.clearing && ls.sess.State == berth.StateActive {
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
// under mu (see Session).
func (q *queue) headEntryLocked(ctx context.Context, gen int64) (*berth.QueueEntry, error) {
	ls := q.ls
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
func (q *queue) abandonTurnLocked(turnID string, err error) {
	ls := q.ls
	ls.logger.Warn("a logged turn did not get its entry", "turn_id", turnID, "err", err)
	ls.Emit(turnID, berth.EventTurnEnded, TurnEndedData{StopReason: berth.TurnCancelled,
		Error: &berth.ACPError{Code: "not_dispatched", Message: "the queued prompt could not be claimed"}})
}

// newEntry builds a pending entry of the current generation.
func (q *queue) newEntry(kind string, in Input) *berth.QueueEntry {
	ls := q.ls
	return &berth.QueueEntry{ID: ids.New("entry"), SessionID: ls.id, Kind: kind, Text: in.text, Content: in.content,
		Generation: ls.sess.Queue.Generation, CreatedAt: time.Now().UTC()}
}

// enqueueLocked stores a prompt behind the turn in flight. The store is
// written under mu (see Session): the pending count moves with it.
func (q *queue) enqueueLocked(ctx context.Context, in Input) (*berth.PromptResult, error) {
	ls := q.ls
	e := q.newEntry(berth.EntryQueue, in)
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
// one. The store is written under mu (see Session): q.steer moves with it.
func (q *queue) stageSteerLocked(ctx context.Context, in Input) (*berth.PromptResult, error) {
	ls := q.ls
	e := q.newEntry(berth.EntrySteer, in)
	res, err := ls.h.Store.EnqueuePrompt(ctx, e, 0)
	if err != nil {
		return nil, err
	}
	if res.Replaced != "" {
		q.noteEntryLocked(res.Replaced, EntryOutcome{Canceled: true})
		ls.Emit("", berth.EventPromptCanceled, EntryData{EntryID: res.Replaced, Reason: cancelReplaced})
	}
	q.steer = e
	ls.Emit("", berth.EventPromptQueued, queuedData{EntryID: e.ID, Kind: e.Kind, Position: 1,
		Generation: e.Generation, Text: e.Text, Content: e.Content})
	if ls.turns.cur != nil && ls.out.w.turnID == ls.turns.cur.id && ls.out.w.truncated {
		// Past the turn's cap no tool-call boundary is seen any more: the
		// steer goes in now.
		q.deliverSteerLocked(ls.turns.cur)
	}
	return &berth.PromptResult{Status: "staged", EntryID: e.ID}, nil
}

// interruptLocked cancels the turn in flight and every pending entry, moves
// the session to a new input generation and starts text as soon as the
// cancelled turn has ended. The text is itself stored as the first entry of
// the new generation, so a restart before it starts does not lose it. The
// store is written under mu (see Session): the generation moves with it.
func (q *queue) interruptLocked(ctx context.Context, in Input) (*berth.PromptResult, error) {
	ls := q.ls
	n, gen, err := q.cancelAllLocked(ctx, cancelInterrupted)
	if err != nil {
		return nil, err
	}
	res := &berth.PromptResult{Status: "started", CanceledEntries: &n, Generation: gen}
	turnID := ids.New("turn")
	if t := ls.turns.cur; t != nil {
		e := q.newEntry(berth.EntryQueue, in)
		if _, err := ls.h.Store.EnqueuePrompt(ctx, e, ls.h.Limits.MaxQueue); err != nil {
			return nil, err
		}
		ls.sess.Queue.Pending++
		ls.changedLocked()
		q.next = &nextTurn{entryID: e.ID, turnID: turnID}
		res.InterruptedTurnID = t.id
		ls.turns.cancelLocked(t)
	} else {
		ls.turns.startLocked(turnID, in, berth.SourceUser)
	}
	res.TurnID = turnID
	return res, nil
}

// dispatchLocked starts the next input once the session is idle: a staged
// steer first, then the oldest queue entry of the current generation.
// Claiming is atomic in the store, so an entry runs at most once; it is
// done under mu (see Session), so the turn it starts is the only one.
func (q *queue) dispatchLocked(ctx context.Context) {
	ls := q.ls
	if ls.turns.cur != nil || q.acceptingLocked() != nil {
		return
	}
	gen := ls.sess.Queue.Generation
	// An interrupt's text runs before a steer staged after it. Each turn is
	// logged before its entry is claimed (see turns.logStartedLocked): a
	// daemon that dies in between finds the turn with its entry still
	// pending, and claims it then (reattach).
	if q.steer != nil && q.next == nil {
		turnID := ids.New("turn")
		e0 := q.steer
		if err := ls.turns.logStartedLocked(turnID, TurnStartedData{Text: e0.Text, Content: e0.Content, Source: berth.SourceSteer, EntryID: e0.ID}); err != nil {
			ls.logger.Error("turn_started not logged", "err", err)
			q.retryDispatchLocked()
			return
		}
		q.steer = nil
		e, err := ls.h.Store.ClaimQueueEntry(ctx, ls.id, berth.EntrySteer, gen, turnID)
		if err == nil {
			q.noteEntryLocked(e.ID, EntryOutcome{TurnID: turnID})
			ls.turns.beginLocked(turnID, entryInput(e))
			return
		}
		q.abandonTurnLocked(turnID, err)
		if !berth.IsCode(err, berth.ENotFound) {
			q.steer = e0
			q.retryDispatchLocked()
			return
		}
	}
	for ls.sess.Queue.Pending > 0 {
		head, err := q.headEntryLocked(ctx, gen)
		if err != nil {
			ls.logger.Error("read the queue", "err", err)
			q.retryDispatchLocked()
			return
		}
		if head == nil {
			// Nothing of this generation is claimable: recount from the store.
			q.recountLocked(ctx)
			return
		}
		turnID, source := ids.New("turn"), berth.SourceQueue
		if q.next != nil && q.next.entryID == head.ID {
			turnID, source = q.next.turnID, berth.SourceUser
		}
		if err := ls.turns.logStartedLocked(turnID, TurnStartedData{Text: head.Text, Content: head.Content, Source: source, EntryID: head.ID}); err != nil {
			ls.logger.Error("turn_started not logged", "err", err)
			q.retryDispatchLocked()
			return
		}
		e, err := ls.h.Store.ClaimQueueEntry(ctx, ls.id, berth.EntryQueue, gen, turnID)
		if err == nil && e.ID != head.ID {
			err = berth.Errorf(berth.EInternal, "claimed %s, not the head of the queue %s", e.ID, head.ID)
		}
		if err != nil {
			q.abandonTurnLocked(turnID, err)
			if berth.IsCode(err, berth.ENotFound) {
				q.recountLocked(ctx)
				return
			}
			ls.logger.Error("claim queued prompt", "err", err)
			q.retryDispatchLocked()
			return
		}
		q.dispatchRetries = 0
		ls.sess.Queue.Pending--
		if q.next != nil && q.next.entryID == e.ID {
			q.next = nil
		}
		q.noteEntryLocked(e.ID, EntryOutcome{TurnID: turnID})
		ls.turns.beginLocked(turnID, entryInput(e))
		return
	}
}

// retryDispatchLocked tries the dispatch again later, backing off from
// 100 ms to 5 s, after the store failed a claim: without it the entries
// would wait for an event that may never come.
func (q *queue) retryDispatchLocked() {
	ls := q.ls
	if ls.exited || q.retryPending {
		return
	}
	delay := min(100*time.Millisecond<<min(q.dispatchRetries, 6), 5*time.Second)
	q.dispatchRetries++
	q.retryPending = true
	ls.wg.Add(1)
	time.AfterFunc(delay, func() {
		defer ls.wg.Done()
		ls.mu.Lock()
		defer ls.mu.Unlock()
		q.retryPending = false
		q.dispatchLocked(context.Background())
	})
}

// recountLocked sets the pending count from the store, after a claim found
// nothing where the count said there was something. It reads the store
// under mu (see Session).
func (q *queue) recountLocked(ctx context.Context) {
	ls := q.ls
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
		q.retryDispatchLocked()
		return
	}
	ls.sess.Queue.Pending = n
	ls.changedLocked()
	if n == 0 {
		q.next = nil
	}
}

// cancelEntryLocked drops one pending entry of a live session. The store
// is written under mu (see Session): the pending count moves with it.
func (q *queue) cancelEntryLocked(ctx context.Context, entryID string) error {
	ls := q.ls
	e, err := ls.h.Store.CancelQueueEntry(ctx, ls.id, entryID)
	if err != nil {
		return err
	}
	switch {
	case e.Kind == berth.EntrySteer:
		q.steer = nil
	case ls.sess.Queue.Pending > 0:
		ls.sess.Queue.Pending--
		ls.changedLocked()
	}
	if q.next != nil && q.next.entryID == e.ID {
		q.next = nil
	}
	q.noteEntryLocked(e.ID, EntryOutcome{Canceled: true})
	ls.Emit("", berth.EventPromptCanceled, EntryData{EntryID: e.ID, Reason: cancelByUser})
	return nil
}

// noteEntryLocked records what became of an entry and wakes its waiters.
func (q *queue) noteEntryLocked(id string, o EntryOutcome) {
	q.outcomes[id] = o
	q.outcomeIDs = append(q.outcomeIDs, id)
	if len(q.outcomeIDs) > maxOutcomes {
		delete(q.outcomes, q.outcomeIDs[0])
		q.outcomeIDs = q.outcomeIDs[1:]
	}
	close(q.inputChanged)
	q.inputChanged = make(chan struct{})
}

// cancelAllLocked cancels every pending entry and the staged steer
// (reason says why, in their prompt_canceled), moving the session to a
// new input generation: an interrupt does, and a clear. It returns how
// many entries it canceled, and the new generation. The store is written
// under mu (see Session): the generation moves with it.
func (q *queue) cancelAllLocked(ctx context.Context, reason string) (int, int64, error) {
	ls := q.ls
	gen := ls.sess.Queue.Generation + 1
	canceled, err := ls.h.Store.CancelQueue(ctx, ls.id, gen)
	if err != nil {
		return 0, 0, err
	}
	// What the store canceled is gone whatever happens next.
	q.steer, q.next, ls.sess.Queue.Pending = nil, nil, 0
	for _, e := range canceled {
		q.noteEntryLocked(e.ID, EntryOutcome{Canceled: true})
		ls.Emit("", berth.EventPromptCanceled, EntryData{EntryID: e.ID, Reason: reason})
	}
	err = ls.saveLocked(ctx, ls.sess.State, func(s *berth.Session) {
		s.Queue = berth.QueueInfo{Generation: gen}
	})
	return len(canceled), gen, err
}

// take restores the pending queue entries and the staged steer of a
// session from its pending entries; changed says that its queue is not
// what its document said (or a steer is staged), for the caller to
// publish.
func (q *queue) take(entries []*berth.QueueEntry) (changed bool) {
	ls := q.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	before := ls.sess.Queue
	ls.sess.Queue.Pending = 0
	for _, e := range entries {
		switch {
		case e.Generation != ls.sess.Queue.Generation:
			// An interrupt moved on past it; it can never run.
		case e.Kind == berth.EntrySteer:
			q.steer = e
		default:
			ls.sess.Queue.Pending++
		}
	}
	return ls.sess.Queue != before || q.steer != nil
}

// deliverSteerLocked takes the staged steer into the turn in flight: it is
// logged as prompt_steered in the turn, the agent's prompt is cancelled,
// and its answer is followed by the steer's text as a new prompt of the
// same turn (turns.run). The steer is claimed in the store under mu (see
// Session), ordered with the agent's updates around it.
func (q *queue) deliverSteerLocked(t *turn) {
	ls := q.ls
	if t.cancelRequested || !t.steerIn.empty() || ls.exited || ls.stopReason != "" || ls.detached.Load() {
		return
	}
	e, err := ls.h.Store.ClaimQueueEntry(context.Background(), ls.id, berth.EntrySteer, ls.sess.Queue.Generation, t.id)
	q.steer = nil
	if err != nil {
		if !berth.IsCode(err, berth.ENotFound) {
			ls.logger.Error("claim steer", "err", err)
		}
		return
	}
	t.steerIn, t.steerID, t.steerCancelSent = entryInput(e), e.ID, make(chan struct{})
	q.noteEntryLocked(e.ID, EntryOutcome{TurnID: t.id})
	ls.Emit(t.id, berth.EventPromptSteered, EntryData{EntryID: e.ID, Text: e.Text, Content: e.Content})
	sent := t.steerCancelSent
	after := ls.turns.senderLocked(t.id)
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		// The next turn's prompt waits for this cancel too (see
		// turns.awaitCancelsBefore), its own continuation only for the write.
		defer after()
		defer close(sent)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ls.client.Cancel(ctx, ls.conv.id()); err != nil {
			ls.logger.Warn("session/cancel for a steer not sent", "err", err)
		}
	}()
}
