package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// turns are the session's turns: the one in flight, the results of the
// last ones for late waiters, and the supervisor's watch on the agent's
// activity during a turn. The session's mu guards them.
type turns struct {
	ls *Session
	// cur is the turn in flight, nil between turns.
	cur *turn
	// results are the results of recent turns by id, resultIDs their ids
	// oldest first.
	results   map[string]*berth.TurnResult
	resultIDs []string
	// seenMessages is the agent's message count at the supervisor's last
	// look, lastActivity when it last moved; hung is set while a turn is
	// stalled (see supervise.go).
	seenMessages int64
	lastActivity time.Time
	hung         bool
	// warming is the warm capture of the next turn's checkpoint
	// (checkpoint.go); warmOff is set once the session is going.
	warming *warmRun
	warmOff bool
	// urge is closed to tell the last turn's checkpoint commit, waiting
	// for the daemon's quiet (Hush), that the next turn needs it now.
	urge chan struct{}
	// cancelOf is the id of the turn whose session/cancel sender (a
	// cancel's or a steer's) started last, and cancelSent is closed once
	// that sender and every one before it returned: the next turn's prompt
	// waits for it, so no cancel of an ended turn follows it. Guarded by
	// ls.mu.
	cancelOf   string
	cancelSent chan struct{}
}

// MaxTurnText caps the message text of a turn kept in memory.
const MaxTurnText = 1 << 20

// maxRecentResults bounds how many finished turns a live session remembers for
// late WaitTurn callers; older ones are rebuilt from the log.
const maxRecentResults = 64

// turn is one prompt round in flight.
type turn struct {
	id string
	// text is the agent's message so far, for ?wait=true; past
	// MaxTurnText it is dropped and textCut set (the log has it all).
	text            strings.Builder
	textCut         bool
	cancelRequested bool
	// steerIn is a steer taken at a tool-call boundary and waiting for the
	// answer to the cancelled prompt; continueWith is it once that came.
	steerIn      Input
	steerID      string
	continueWith Input
	// steerCancelSent is closed once the steer's session/cancel is written.
	steerCancelSent chan struct{}
	// promptSent is closed once the turn's current prompt is written (or
	// could not be); a cancel waits for it. Guarded by ls.mu.
	promptSent chan struct{}
	done       chan struct{}
	result     *berth.TurnResult
	graceTimer *time.Timer
	// began is when this daemon started the turn (zero for one a previous
	// daemon started: its duration is not known here).
	began time.Time
	// checkpoint is the id of the checkpoint taken before the turn, once
	// it is (a prune keeps it while the turn runs); committed is closed
	// once it is on disk. Guarded by ls.mu.
	checkpoint string
	committed  chan struct{}
	// heard is closed at the agent's first update in the turn (nil for a
	// turn a previous daemon started). Guarded by ls.mu.
	heard chan struct{}
	// unhush ends the turn's count in the daemon's Hush: at the agent's
	// first update, or the turn's end (nil for a turn a previous daemon
	// started).
	unhush func()
}

// heardLocked notes that the agent said something in the turn.
func (t *turn) heardLocked() {
	if t.heard != nil {
		closeOnce(t.heard)
	}
	if t.unhush != nil {
		t.unhush()
	}
}

// addChunk adds an agent message chunk to the turn's text. A chunk whose
// text is surely past MaxTurnText is not decoded: a JSON string literal
// of n bytes holds at least (n-2)/6 bytes of text.
func (t *turn) addChunk(u *acp.Update) {
	if t.textCut {
		return
	}
	if raw := u.RawText(); raw != nil && t.text.Len()+(len(raw)-2)/6 > MaxTurnText {
		t.textCut = true
		t.text.Reset()
		return
	}
	t.addText(u.Text())
}

// addText appends a message chunk to the turn's text, up to MaxTurnText.
func (t *turn) addText(s string) {
	if t.textCut {
		return
	}
	if t.text.Len()+len(s) > MaxTurnText {
		t.textCut = true
		t.text.Reset()
		return
	}
	t.text.WriteString(s)
}

// TurnStartedData is the data of turn_started. EntryID names the queue
// entry the turn runs, if any.
type TurnStartedData struct {
	Text string `json:"text"`
	// Content is the prompt's blocks when it was sent as content (text
	// is then the text of its text blocks).
	Content []berth.ContentBlock `json:"content,omitempty"`
	Source  string               `json:"source"`
	EntryID string               `json:"entry_id,omitempty"`
}

// Input returns the prompt the turn started with.
func (d *TurnStartedData) Input() Input { return Input{text: d.Text, content: d.Content} }

// TurnEndedData is the data of turn_ended.
type TurnEndedData struct {
	StopReason string          `json:"stop_reason"`
	Error      *berth.ACPError `json:"error,omitempty"`
	Usage      json.RawMessage `json:"usage,omitempty"`
}

// CancelTurn cancels the turn in flight and returns its id.
func (ls *Session) CancelTurn() (string, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	t := ls.turns.cur
	if t == nil {
		return "", berth.Errorf(berth.EConflict, "no turn in flight")
	}
	ls.turns.cancelLocked(t)
	return t.id, nil
}

// WaitTurn waits for turn turnID when the session runs it or ran it of
// late and returns its result; nil when the log is to say (the turn is
// not known here, or its text was too long to keep), with entry set when
// turnID is an interrupt's, which starts once the turn it cancelled ends.
func (ls *Session) WaitTurn(ctx context.Context, turnID string) (res *berth.TurnResult, entry string, err error) {
	ls.mu.Lock()
	t := ls.turns.cur
	res = ls.turns.results[turnID]
	if ls.queue.next != nil && ls.queue.next.turnID == turnID {
		entry = ls.queue.next.entryID
	}
	ls.mu.Unlock()
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

func (tr *turns) currentIDLocked() string {
	if tr.cur == nil {
		return ""
	}
	return tr.cur.id
}

// currentID returns the id of the turn in flight, or "".
func (tr *turns) currentID() string {
	ls := tr.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if tr.cur == nil {
		return ""
	}
	return tr.cur.id
}

// startLocked begins a turn; the caller has checked that the session
// is active and idle.
func (tr *turns) startLocked(turnID string, in Input, source string) string {
	ls := tr.ls
	if err := tr.logStartedLocked(turnID, TurnStartedData{Text: in.text, Content: in.content, Source: source}); err != nil {
		ls.logger.Error("turn_started not logged", "turn_id", turnID, "err", err)
	}
	tr.beginLocked(turnID, in)
	return turnID
}

// logStartedLocked logs turn_started and waits for its commit: the
// agent is prompted only once the log has the turn, so a daemon that dies
// right after finds the turn its agent is working on, and a queued entry
// is claimed only once its turn is there to show for it. The wait for the
// commit is under mu (see Session): the log's writer never takes it.
func (tr *turns) logStartedLocked(turnID string, d TurnStartedData) error {
	ls := tr.ls
	if ls.detached.Load() {
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	_, err := ls.h.Log.AppendSync(context.Background(), berth.NewEvent(ls.id, turnID, berth.EventTurnStarted, d))
	return err
}

// beginLocked makes turnID the turn in flight (its turn_started is
// logged) and starts its runner.
func (tr *turns) beginLocked(turnID string, in Input) {
	ls := tr.ls
	now := time.Now()
	t := &turn{id: turnID, done: make(chan struct{}), promptSent: make(chan struct{}), heard: make(chan struct{}), began: now,
		unhush: ls.h.Hush.hold()}
	tr.cur = t
	ls.out.closeLocked(turnID)
	// A stall is measured from the turn's start at the earliest.
	tr.lastActivity, ls.sess.LastActivityAt = now, now.UTC()
	ls.changedLocked()
	ls.turnWG.Add(1)
	go tr.run(t, in)
}

// run sends the prompt and ends the turn. A turn answered by the agent
// is closed on the reader goroutine the moment the answer arrives, so
// turn_ended follows exactly the updates sent before the answer; a turn
// whose connection ended is closed here. A steer delivered during the turn
// makes the answer to the cancelled prompt the start of another prompt in
// the same turn.
func (tr *turns) run(t *turn, in Input) {
	ls := tr.ls
	defer ls.turnWG.Done()
	ls.mu.Lock()
	// An agent that could not reopen the conversation learns it here.
	carry := ls.conv.carry
	ls.conv.carry = ""
	ls.mu.Unlock()
	// A rewind's or a fork's note goes first; then the workspace is
	// recorded as it is before the agent sees the prompt.
	carry = tr.takeNote() + carry
	tr.checkpoint(t)
	tr.awaitCancelsBefore(t)
	for {
		answered := func(resp acp.PromptResponse, err error) {
			if !tr.continueWithSteer(t, err) {
				tr.end(t, turnEnd(resp, err, false), ls.client.Position())
			}
		}
		// session/cancel waits for the prompt to be written: it must never overtake it.
		sent := t.promptSent
		ctx := acp.WithSent(context.Background(), func() { closeOnce(sent) })
		resp, err := ls.client.PromptThen(ctx, ls.conv.id(), answered, in.blocks(carry)...)
		carry = ""
		closeOnce(sent)
		if next, ok := tr.takeSteer(t); ok {
			// The steer's cancel goes out before its prompt, or the agent
			// could take the cancel for the new prompt.
			<-t.steerCancelSent
			in = next
			continue
		}
		tr.end(t, turnEnd(resp, err, ls.life.stopping()), 0)
		return
	}
}

// continueWithSteer reports whether the answer to a prompt berth cancelled
// to deliver a steer continues the turn with the steer's text.
func (tr *turns) continueWithSteer(t *turn, err error) bool {
	ls := tr.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if tr.cur != t || t.steerIn.empty() {
		return false
	}
	if t.cancelRequested || ls.stopReason != "" || errors.Is(err, acp.ErrClosed) || isClosedErr(err) {
		// The turn ends here: the steer taken into it is dropped, and says so.
		ls.Emit(t.id, berth.EventPromptCanceled, EntryData{EntryID: t.steerID, Reason: cancelTurnEnded})
		t.steerIn = Input{}
		return false
	}
	t.continueWith, t.steerIn = t.steerIn, Input{}
	return true
}

// takeSteer returns the text the turn continues with, if any.
func (tr *turns) takeSteer(t *turn) (Input, bool) {
	ls := tr.ls
	ls.mu.Lock()
	defer ls.mu.Unlock()
	next := t.continueWith
	t.continueWith = Input{}
	if next.empty() || tr.cur != t {
		return Input{}, false
	}
	if t.cancelRequested || ls.stopReason != "" {
		// Cancelled (or interrupted, or stopping) before the steer went out.
		ls.Emit(t.id, berth.EventPromptCanceled, EntryData{EntryID: t.steerID, Reason: cancelTurnEnded})
		return Input{}, false
	}
	// The steer's prompt is the one a cancel from now on waits for.
	t.promptSent = make(chan struct{})
	return next, true
}

// end closes a turn once: turn_ended is its last event, the session's
// counters are saved, then waiters are released. src is the end of the
// agent's answer line when the answer closes the turn (else 0).
func (tr *turns) end(t *turn, end TurnEndedData, src int64) {
	ls := tr.ls
	if t.unhush != nil {
		// The agent will not speak in this turn any more.
		t.unhush()
	}
	// Held from the events of the questions the turn ends to their
	// records: a detach waits for the pairs.
	ls.recordMu.RLock()
	ls.mu.Lock()
	if tr.cur != t || ls.detached.Load() {
		// A detached live session leaves the turn to the next daemon.
		ls.mu.Unlock()
		ls.recordMu.RUnlock()
		return
	}
	if t.cancelRequested && end.StopReason != berth.TurnError {
		// Many agents answer end_turn to a cancel; berth asked, so it records cancelled.
		end.StopReason = berth.TurnCancelled
	}
	if t.graceTimer != nil && t.graceTimer.Stop() {
		ls.wg.Done()
	}
	// A question the agent left open dies with its turn, before turn_ended;
	// so does one a previous daemon stored that the agent never asked again.
	questions := ls.asks.endTurnLocked(t.id)
	if tr.hung && !ls.exited && ls.stopReason == "" {
		// The agent answered: whatever the supervisor saw last, it is not stalled.
		ls.Emit(t.id, berth.EventRuntimeRecovered, map[string]any{"reason": "the agent ended the turn"})
	}
	tr.hung = false
	// What the turn dropped of the agent's output is told before it ends.
	ls.out.closeLocked("")
	ls.emitFrom(src, t.id, berth.EventTurnEnded, end)
	took := time.Duration(-1)
	if !t.began.IsZero() {
		took = time.Since(t.began)
	}
	ls.h.Observer.TurnEnded(end.StopReason, took)
	res := &berth.TurnResult{TurnID: t.id, StopReason: end.StopReason, Text: t.text.String(), Error: end.Error}
	t.result = res
	if !t.textCut {
		tr.rememberLocked(res)
	}
	tr.cur = nil
	err := ls.saveLocked(context.Background(), ls.sess.State, func(s *berth.Session) {
		s.Turns++
		s.LastActivityAt = time.Now().UTC()
		if end.Error != nil && end.Error.Code == "auth_required" {
			s.NeedsAuth = true
		} else if end.StopReason == berth.TurnEndTurn {
			s.NeedsAuth = false
		}
	})
	if err != nil {
		ls.logger.Warn("save after turn", "err", err)
	}
	// The next input starts right away, ordered after this turn's end;
	// else the next turn's checkpoint is taken now, off its prompt's path.
	ls.queue.dispatchLocked(context.Background())
	tr.warmUpLocked(t.committed)
	ls.mu.Unlock()
	ls.asks.finishTurn(questions)
	close(t.done)
	ls.recordMu.RUnlock()
	// The turn's save may have found the lease lost.
	ls.tellLeaseLost()
	if ls.h.TurnEnded != nil {
		ls.h.TurnEnded(ls.id, t.id)
	}
}

// rememberLocked keeps a finished turn's result for late waiters.
func (tr *turns) rememberLocked(r *berth.TurnResult) {
	if tr.results == nil {
		tr.results = make(map[string]*berth.TurnResult)
	}
	tr.results[r.TurnID] = r
	tr.resultIDs = append(tr.resultIDs, r.TurnID)
	if len(tr.resultIDs) > maxRecentResults {
		delete(tr.results, tr.resultIDs[0])
		tr.resultIDs = tr.resultIDs[1:]
	}
}

// cancelLocked asks the agent to end a turn (once): session/cancel is
// sent, every pending permission request is answered cancelled, and a
// timer kills the agent if the turn has not ended within
// limits.cancel_grace.
func (tr *turns) cancelLocked(t *turn) {
	ls := tr.ls
	if t.cancelRequested || ls.exited {
		t.cancelRequested = true
		return
	}
	t.cancelRequested = true
	ls.wg.Add(1)
	t.graceTimer = time.AfterFunc(ls.h.Limits.CancelGrace, func() {
		defer ls.wg.Done()
		tr.cancelExpired(t)
	})
	ls.asks.cancelLocked()
	// Written off the caller's goroutine: this may run on the ACP reader,
	// and the agent's stdin may be full while it waits to be read.
	sent := t.promptSent
	after := tr.senderLocked(t.id)
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		defer after()
		tr.sendCancel(t, sent)
	}()
}

// senderLocked makes the goroutine about to start a session/cancel sender
// of turn turnID; it calls the function returned as it returns, which
// waits for the senders before it, so that waiting for the last one
// (awaitCancelsBefore) waits for them all.
func (tr *turns) senderLocked(turnID string) (after func()) {
	prev, finished := tr.cancelSent, make(chan struct{})
	tr.cancelOf, tr.cancelSent = turnID, finished
	return func() {
		if prev != nil {
			<-prev
		}
		close(finished)
	}
}

// cancelResendFirst is how long a cancelled turn may go on before its
// session/cancel is sent again; each later wait is twice the one before,
// up to cancelResendMax.
const (
	cancelResendFirst = 500 * time.Millisecond
	cancelResendMax   = 8 * time.Second
)

// sendCancel writes session/cancel for t once its prompt is written (a
// cancel ahead of its prompt would be ignored, and the prompt then run in
// full), and again while the turn goes on, until it ends or the
// connection does. session/cancel is idempotent, and an agent can lose
// one that arrives right behind its prompt: the ACP Go SDK reads the
// prompt and the cancel in order but handles them on two goroutines.
func (tr *turns) sendCancel(t *turn, sent <-chan struct{}) {
	ls := tr.ls
	wait := time.NewTimer(10 * time.Second)
	defer wait.Stop()
	select {
	case <-sent:
	case <-wait.C:
	case <-t.done:
		return
	case <-ls.client.Done():
		return
	}
	again := cancelResendFirst
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := ls.client.Cancel(ctx, ls.conv.id())
		cancel()
		if err != nil {
			ls.logger.Warn("session/cancel not sent", "err", err)
			return
		}
		wait.Reset(again)
		select {
		case <-t.done:
			return
		case <-ls.client.Done():
			return
		case <-wait.C:
		}
		if ls.detached.Load() {
			// The daemon let go of the agent: nothing more reaches it.
			return
		}
		ls.logger.Debug("the agent has not ended a cancelled turn; sending session/cancel again", "turn_id", t.id)
		again = min(2*again, cancelResendMax)
	}
}

// awaitCancelsBefore waits until no session/cancel of a turn before t can
// be written any more: one written after t's prompt would cancel t.
func (tr *turns) awaitCancelsBefore(t *turn) {
	ls := tr.ls
	ls.mu.Lock()
	of, sent := tr.cancelOf, tr.cancelSent
	ls.mu.Unlock()
	if sent != nil && of != t.id {
		<-sent
	}
}

// cancelExpired kills an agent that did not end a cancelled turn in time.
func (tr *turns) cancelExpired(t *turn) {
	ls := tr.ls
	select {
	case <-t.done:
		return
	default:
	}
	if ls.detached.Load() {
		// The next daemon judges the agent.
		return
	}
	ls.logger.Warn("agent ignored a cancel; killing it", "turn_id", t.id)
	// Hung, not crashed: the agent stopped answering and berth ended it.
	ls.life.requestStop(berth.StopStallTimeout, &berth.Failure{Kind: berth.FailTimeout,
		Message: fmt.Sprintf("the agent did not end a cancelled turn within limits.cancel_grace (%s); berth stopped it", ls.h.Limits.CancelGrace)})
	if _, err := ls.proc.Stop(context.Background(), 0); err != nil {
		ls.logger.Warn("kill after cancel grace", "err", err)
	}
}

// isClosedErr reports whether err says the connection to the agent ended.
func isClosedErr(err error) bool {
	var rpcErr *acp.Error
	return errors.As(err, &rpcErr) && rpcErr.Message == acp.ErrClosed.Error()
}

// turnEnd says how a turn ended from the agent's answer or the error that
// took its place. stopping tells that berth is stopping the agent.
func turnEnd(resp acp.PromptResponse, err error, stopping bool) TurnEndedData {
	end := TurnEndedData{StopReason: resp.StopReason, Usage: resp.Usage}
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

// closeOnce closes ch unless it is closed already; only the turn's runner
// closes it, so there is no race between the check and the close.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}
