package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// turnStartedData is the data of turn_started. EntryID names the queue
// entry the turn runs, if any.
type turnStartedData struct {
	Text string `json:"text"`
	// Content is the prompt's blocks when it was sent as content (text
	// is then the text of its text blocks).
	Content []berth.ContentBlock `json:"content,omitempty"`
	Source  string               `json:"source"`
	EntryID string               `json:"entry_id,omitempty"`
}

// input returns the prompt the turn started with.
func (d *turnStartedData) input() input { return input{text: d.Text, content: d.Content} }

// turnEndedData is the data of turn_ended.
type turnEndedData struct {
	StopReason string          `json:"stop_reason"`
	Error      *berth.ACPError `json:"error,omitempty"`
	Usage      json.RawMessage `json:"usage,omitempty"`
}

// startTurnLocked begins a turn; the caller has checked that the session
// is active and idle.
func (rt *runtime) startTurnLocked(turnID string, in input, source string) string {
	if err := rt.logTurnStartedLocked(turnID, turnStartedData{Text: in.text, Content: in.content, Source: source}); err != nil {
		rt.logger.Error("turn_started not logged", "turn_id", turnID, "err", err)
	}
	rt.beginTurnLocked(turnID, in)
	return turnID
}

// logTurnStartedLocked logs turn_started and waits for its commit: the
// agent is prompted only once the log has the turn, so a daemon that dies
// right after finds the turn its agent is working on, and a queued entry
// is claimed only once its turn is there to show for it. The wait for the
// commit is under mu (see runtime): the log's writer never takes it.
func (rt *runtime) logTurnStartedLocked(turnID string, d turnStartedData) error {
	if rt.detached.Load() {
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	_, err := rt.h.log.AppendSync(context.Background(), berth.NewEvent(rt.id, turnID, berth.EventTurnStarted, d))
	return err
}

// beginTurnLocked makes turnID the turn in flight (its turn_started is
// logged) and starts its runner.
func (rt *runtime) beginTurnLocked(turnID string, in input) {
	now := time.Now()
	t := &turn{id: turnID, done: make(chan struct{}), promptSent: make(chan struct{}), began: now}
	rt.turn = t
	rt.closeOutputLocked(turnID)
	// A stall is measured from the turn's start at the earliest.
	rt.lastActivity, rt.sess.LastActivityAt = now, now.UTC()
	rt.changedLocked()
	rt.turnWG.Add(1)
	go rt.runTurn(t, in)
}

// runTurn sends the prompt and ends the turn. A turn answered by the agent
// is closed on the reader goroutine the moment the answer arrives, so
// turn_ended follows exactly the updates sent before the answer; a turn
// whose connection ended is closed here. A steer delivered during the turn
// makes the answer to the cancelled prompt the start of another prompt in
// the same turn.
func (rt *runtime) runTurn(t *turn, in input) {
	defer rt.turnWG.Done()
	rt.mu.Lock()
	// An agent that could not reopen the conversation learns it here.
	carry := rt.carry
	rt.carry = ""
	rt.mu.Unlock()
	// A rewind's or a fork's note goes first; then the workspace is
	// recorded as it is before the agent sees the prompt.
	carry = rt.takeNote() + carry
	rt.checkpointTurn(t)
	for {
		answered := func(resp acp.PromptResponse, err error) {
			if !rt.continueWithSteer(t, err) {
				rt.endTurn(t, turnEnd(resp, err, false), rt.linePos())
			}
		}
		// session/cancel waits for the prompt to be written: it must never overtake it.
		sent := t.promptSent
		ctx := acp.WithSent(context.Background(), func() { closeOnce(sent) })
		resp, err := rt.client.PromptThen(ctx, rt.acpSession(), answered, in.blocks(carry)...)
		carry = ""
		closeOnce(sent)
		if next, ok := rt.takeSteer(t); ok {
			// The steer's cancel goes out before its prompt, or the agent
			// could take the cancel for the new prompt.
			<-t.steerCancelSent
			in = next
			rt.mu.Lock()
			t.promptSent = make(chan struct{})
			rt.mu.Unlock()
			continue
		}
		rt.endTurn(t, turnEnd(resp, err, rt.stopping()), 0)
		return
	}
}

// continueWithSteer reports whether the answer to a prompt berth cancelled
// to deliver a steer continues the turn with the steer's text.
func (rt *runtime) continueWithSteer(t *turn, err error) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.turn != t || t.steerIn.empty() {
		return false
	}
	if t.cancelRequested || rt.stopReason != "" || errors.Is(err, acp.ErrClosed) || isClosedErr(err) {
		// The turn ends here: the steer taken into it is dropped, and says so.
		rt.emit(t.id, berth.EventPromptCanceled, entryData{EntryID: t.steerID, Reason: cancelTurnEnded})
		t.steerIn = input{}
		return false
	}
	t.continueWith, t.steerIn = t.steerIn, input{}
	return true
}

// takeSteer returns the text the turn continues with, if any.
func (rt *runtime) takeSteer(t *turn) (input, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	next := t.continueWith
	t.continueWith = input{}
	if next.empty() || rt.turn != t {
		return input{}, false
	}
	if t.cancelRequested || rt.stopReason != "" {
		// Cancelled (or interrupted, or stopping) before the steer went out.
		rt.emit(t.id, berth.EventPromptCanceled, entryData{EntryID: t.steerID, Reason: cancelTurnEnded})
		return input{}, false
	}
	return next, true
}

// isClosedErr reports whether err says the connection to the agent ended.
func isClosedErr(err error) bool {
	var rpcErr *acp.Error
	return errors.As(err, &rpcErr) && rpcErr.Message == acp.ErrClosed.Error()
}

// turnEnd says how a turn ended from the agent's answer or the error that
// took its place. stopping tells that berth is stopping the agent.
func turnEnd(resp acp.PromptResponse, err error, stopping bool) turnEndedData {
	end := turnEndedData{StopReason: resp.StopReason, Usage: resp.Usage}
	var rpcErr *acp.Error
	switch {
	case err == nil:
		switch end.StopReason {
		case "":
			end.StopReason = berth.TurnEndTurn
		case berth.TurnEndTurn, berth.TurnCancelled, berth.TurnMaxTokens, berth.TurnMaxTurnRequests, berth.TurnRefusal:
		default:
			// Not ACP's: readers can rely on the set; the agent's word is kept.
			end.Error = &berth.ACPError{Code: "unknown_stop_reason", StopReason: end.StopReason,
				Message: "the agent ended the turn with a stop reason ACP does not define"}
			end.StopReason = berth.TurnError
		}
	case errors.As(err, &rpcErr) && rpcErr.Code == acp.CodeAuthRequired:
		end.StopReason = berth.TurnError
		end.Error = &berth.ACPError{Code: "auth_required", Message: rpcErr.Message, Data: rpcErr.Data}
	case rpcErr != nil && rpcErr.Message != acp.ErrClosed.Error():
		end.StopReason = berth.TurnError
		end.Error = &berth.ACPError{Code: "agent_error", Message: rpcErr.Message, Data: rpcErr.Data}
	case stopping:
		end.StopReason = berth.TurnCancelled
	default:
		// The connection ended under the turn: the agent exited.
		end.StopReason = berth.TurnError
		end.Error = &berth.ACPError{Code: "agent_exited", Message: "the agent exited during the turn"}
	}
	return end
}

// endTurn closes a turn once: turn_ended is its last event, the session's
// counters are saved, then waiters are released. src is the end of the
// agent's answer line when the answer closes the turn (else 0).
func (rt *runtime) endTurn(t *turn, end turnEndedData, src int64) {
	// Held from the events of the questions the turn ends to their
	// records: a detach waits for the pairs.
	rt.recordMu.RLock()
	defer rt.recordMu.RUnlock()
	rt.mu.Lock()
	if rt.turn != t || rt.detached.Load() {
		// A detached runtime leaves the turn to the next daemon.
		rt.mu.Unlock()
		return
	}
	if t.cancelRequested && end.StopReason != berth.TurnError {
		// Many agents answer end_turn to a cancel; berth asked, so it records cancelled.
		end.StopReason = berth.TurnCancelled
	}
	if t.graceTimer != nil && t.graceTimer.Stop() {
		rt.wg.Done()
	}
	// A question the agent left open dies with its turn, before turn_ended;
	// so does one a previous daemon stored that the agent never asked again.
	orphans, waiters := rt.resolveTurnLocked(t.id)
	stale := rt.dropAdoptableLocked(t.id)
	finishElicitations := rt.endTurnElicitationsLocked(t.id)
	if rt.hung && !rt.exited && rt.stopReason == "" {
		// The agent answered: whatever the supervisor saw last, it is not stalled.
		rt.emit(t.id, berth.EventRuntimeRecovered, map[string]any{"reason": "the agent ended the turn"})
	}
	rt.hung = false
	// What the turn dropped of the agent's output is told before it ends.
	rt.closeOutputLocked("")
	rt.emitFrom(src, t.id, berth.EventTurnEnded, end)
	took := time.Duration(-1)
	if !t.began.IsZero() {
		took = time.Since(t.began)
	}
	rt.h.observer.TurnEnded(end.StopReason, took)
	res := &berth.TurnResult{TurnID: t.id, StopReason: end.StopReason, Text: t.text.String(), Error: end.Error}
	t.result = res
	if !t.textCut {
		rt.rememberResultLocked(res)
	}
	rt.turn = nil
	err := rt.saveLocked(context.Background(), rt.sess.State, func(s *berth.Session) {
		s.Turns++
		s.LastActivityAt = time.Now().UTC()
		if end.Error != nil && end.Error.Code == "auth_required" {
			s.NeedsAuth = true
		} else if end.StopReason == berth.TurnEndTurn {
			s.NeedsAuth = false
		}
	})
	if err != nil {
		rt.logger.Warn("save after turn", "err", err)
	}
	// The next input starts right away, ordered after this turn's end.
	rt.dispatchLocked(context.Background())
	rt.mu.Unlock()
	for i, p := range orphans {
		rt.complete(context.Background(), p, waiters[i])
	}
	finishElicitations()
	for i := range stale {
		p := &stale[i]
		now := time.Now().UTC()
		p.State, p.DecidedBy, p.DecidedAt = berth.PermissionCanceled, berth.DecidedByCancel, &now
		if err := rt.h.store.DecidePermission(context.Background(), p); err != nil && !berth.IsCode(err, berth.EConflict) {
			rt.logger.Warn("cancel a stale permission", "err", err)
		}
	}
	close(t.done)
}

// WaitTurn implements berth.SessionService.
func (m *Manager) WaitTurn(ctx context.Context, id, turnID string) (*berth.TurnResult, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if strings.HasPrefix(turnID, entryPrefix) {
		// A queued or staged prompt: its turn is known once it runs.
		return m.waitEntry(ctx, id, turnID)
	}
	if rt := m.runtimeOf(id); rt != nil {
		res, entry, err := rt.waitTurn(ctx, turnID)
		if res != nil || err != nil {
			return res, err
		}
		if entry != "" {
			// An interrupt's turn starts once the turn it cancelled has ended.
			return m.waitEntry(ctx, id, entry)
		}
	}
	// The turn is over (or the session stopped since, or its text was too
	// long to keep in memory): rebuild it from the log.
	if err := m.log.FlushSession(ctx, id); err != nil {
		return nil, err
	}
	return m.turnFromLog(ctx, id, turnID)
}

// turnFromLog rebuilds a finished turn's result from its events alone
// (the store finds them by the turn), in time linear in their size; it
// stops when ctx ends.
func (m *Manager) turnFromLog(ctx context.Context, id, turnID string) (*berth.TurnResult, error) {
	if m.runtimeOf(id) == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
	}
	b := transcriptBuilder{long: func(turnID string) berth.LongText { return m.turnText(id, turnID) }}
	if err := m.foldLog(ctx, id, berth.EventFilter{TurnID: turnID}, &b); err != nil {
		return nil, err
	}
	for _, t := range b.finish() {
		if t.TurnID != turnID {
			continue
		}
		if t.StopReason == "" {
			return nil, berth.Errorf(berth.EConflict, "turn %s has not ended", turnID)
		}
		res := &berth.TurnResult{TurnID: turnID, StopReason: t.StopReason, Text: t.Text, Long: t.Long}
		if len(t.Error) > 0 {
			var e berth.ACPError
			if json.Unmarshal(t.Error, &e) == nil {
				res.Error = &e
			}
		}
		return res, nil
	}
	return nil, berth.Errorf(berth.ENotFound, "turn %s not found", turnID)
}

// Cancel implements berth.SessionService: it asks the agent to end the turn
// in flight and, if the agent has not within limits.cancel_grace, kills it.
func (m *Manager) Cancel(ctx context.Context, id string) (string, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return "", err
	}
	rt := m.runtimeOf(id)
	if rt == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return "", err
		}
		return "", berth.Errorf(berth.EConflict, "session is stopped: no turn to cancel")
	}
	return rt.cancelTurn()
}

// cancelTurn cancels the turn in flight and returns its id.
func (rt *runtime) cancelTurn() (string, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	t := rt.turn
	if t == nil {
		return "", berth.Errorf(berth.EConflict, "no turn in flight")
	}
	rt.cancelTurnLocked(t)
	return t.id, nil
}

// waitTurn waits for turn turnID when the session runs it or ran it of
// late and returns its result; nil when the log is to say (the turn is
// not known here, or its text was too long to keep), with entry set when
// turnID is an interrupt's, which starts once the turn it cancelled ends.
func (rt *runtime) waitTurn(ctx context.Context, turnID string) (res *berth.TurnResult, entry string, err error) {
	rt.mu.Lock()
	t := rt.turn
	res = rt.results[turnID]
	if rt.next != nil && rt.next.turnID == turnID {
		entry = rt.next.entryID
	}
	rt.mu.Unlock()
	if res != nil || entry != "" || t == nil || t.id != turnID {
		return res, entry, nil
	}
	select {
	case <-t.done:
		if !t.textCut {
			return t.result, "", nil
		}
		return nil, "", nil
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// cancelTurnLocked asks the agent to end a turn (once): session/cancel is
// sent, every pending permission request is answered cancelled, and a
// timer kills the agent if the turn has not ended within
// limits.cancel_grace.
func (rt *runtime) cancelTurnLocked(t *turn) {
	if t.cancelRequested || rt.exited {
		t.cancelRequested = true
		return
	}
	t.cancelRequested = true
	rt.wg.Add(1)
	t.graceTimer = time.AfterFunc(rt.h.limits.CancelGrace, func() {
		defer rt.wg.Done()
		rt.cancelExpired(t)
	})
	rt.cancelPermissionsLocked()
	rt.cancelElicitationsLocked()
	// Written off the caller's goroutine: this may run on the ACP reader,
	// and the agent's stdin may be full while it waits to be read. It waits
	// for the turn's prompt to be written: a cancel ahead of its prompt
	// would be ignored, and the prompt then run in full.
	sent := t.promptSent
	rt.wg.Add(1)
	go func() {
		defer rt.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		select {
		case <-sent:
		case <-ctx.Done():
		}
		if err := rt.client.Cancel(ctx, rt.acpSession()); err != nil {
			rt.logger.Warn("session/cancel not sent", "err", err)
		}
	}()
}

// cancelExpired kills an agent that did not end a cancelled turn in time.
func (rt *runtime) cancelExpired(t *turn) {
	select {
	case <-t.done:
		return
	default:
	}
	if rt.detached.Load() {
		// The next daemon judges the agent.
		return
	}
	rt.logger.Warn("agent ignored a cancel; killing it", "turn_id", t.id)
	rt.requestStop(berth.StopAgentCrashed, &berth.Failure{Kind: berth.FailTimeout,
		Message: "the agent did not end a cancelled turn within limits.cancel_grace"})
	if _, err := rt.proc.Stop(context.Background(), 0); err != nil {
		rt.logger.Warn("kill after cancel grace", "err", err)
	}
}

// closeOnce closes ch unless it is closed already; only the turn's runner
// closes it, so there is no race between the check and the close.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
