package live

import (
	"context"
	"strconv"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// Recovered is what a reattached session carries on with, as the store
// has it: its open turn ("" for none) and that turn's input, its pending
// permissions and elicitations, for the agent's requests served again to
// take back, and its queued input.
type Recovered struct {
	Open    string
	In      Input
	Pending []*berth.Permission
	Queue   []*berth.QueueEntry
	Elics   []*berth.Elicitation
}

// Reattached is a session wired to its shim again, about to carry on: the
// turn in flight (nil for none) and how it ends (wait nil: its prompt is
// still to be sent).
type Reattached struct {
	hello shim.Hello
	t     *turn
	in    Input
	wait  func(context.Context) (acp.PromptResponse, error)
}

// Reattach wires a session whose agent runs on in its shim to it again,
// from the last line the log has, with what r recovered. Nothing runs
// yet (CarryOn): a failure lets the shim go.
func (ls *Session) Reattach(r Recovered) (*Reattached, error) {
	ls.asks.recover(r.Pending, r.Elics)
	queued := ls.queue.take(r.Queue)
	h := ls.shim.Hello()
	ls.life.wire(ls.shim, acp.Options{StartOffset: h.From, LastID: h.LastID, ReplayUntil: h.End, ReplayServe: servedAgain(h)})
	t, wait, err := ls.turns.recover(r.Open, h)
	if err != nil {
		return nil, err
	}
	ls.mu.Lock()
	// A session with no turn, its queue as its document has it, looks as
	// clients listed it while it reattached (the stored view): a boot of
	// a thousand idle sessions publishes nothing. The supervisor finds it
	// among the live sessions (findEvery).
	if queued || t != nil || ls.sess.CurrentTurnID != "" || ls.h.InCluster {
		ls.changedLocked()
	}
	ls.mu.Unlock()
	return &Reattached{hello: h, t: t, in: r.In, wait: wait}, nil
}

// CarryOn runs a reattached live session: nothing fails from here. The
// turn's runner starts before the stream does: an answer replayed at once
// ends this turn, never one dispatched after it.
func (ls *Session) CarryOn(ctx context.Context, a *Reattached) {
	ls.asks.dropNetworkQuestions(context.WithoutCancel(ctx))
	if t := a.t; t != nil {
		ls.turnWG.Add(1)
		if a.wait == nil {
			// The prompt never reached the agent: it goes out now.
			ls.logger.Info("resending the prompt of a turn the previous daemon did not send", "turn_id", t.id)
			go ls.turns.run(t, a.in)
		} else {
			go ls.turns.await(t, a.wait)
		}
	}
	ls.life.run(unansweredRequests(a.hello))
	close(ls.life.ready)
	close(ls.life.handshook)
	if a.t == nil && a.hello.Exited == nil {
		// What was queued runs now; an agent that has exited runs nothing
		// (the session stops, and resumes for its queue).
		ls.mu.Lock()
		ls.queue.dispatchLocked(ctx)
		ls.mu.Unlock()
	}
	ls.logger.Debug("session reattached", "from", a.hello.From, "end", a.hello.End, "turn_open", a.t != nil)
}

// recover sets up the turn in flight, open, of a wired live session: it
// waits for the answer to the latest prompt the agent has not answered (a
// steer's follow-up is a later prompt), or, when no prompt went out, wait
// is nil and the turn's prompt is to be sent.
func (tr *turns) recover(open string, h shim.Hello) (*turn, func(context.Context) (acp.PromptResponse, error), error) {
	ls := tr.ls
	// What the log has of the window in flight is counted as the shim
	// counted it; the rest, from h.From, is counted as it is read again,
	// as a live stream is (never twice). A turn's drops the shim reports
	// when the turn ends; those between turns it reported at the first,
	// before h.From, which a daemon has warned of.
	ls.out.w = outputWindow{turnID: open, recorded: h.OutputKept, truncated: h.OutputTruncated,
		warned: open == "" && h.OutputTruncated}
	if open == "" {
		return nil, nil, nil
	}
	t := &turn{id: open, done: make(chan struct{}), promptSent: make(chan struct{})}
	tr.cur, tr.lastActivity = t, time.Now()
	latest := int64(-1)
	for _, c := range h.Calls {
		if c.Method != acp.MethodSessionPrompt || (c.AnsweredAt > 0 && c.AnsweredAt <= h.From) {
			continue
		}
		if id, err := strconv.ParseInt(string(c.ID), 10, 64); err == nil && id > latest {
			latest = id
		}
	}
	if latest < 0 {
		return t, nil, nil
	}
	close(t.promptSent)
	wait, err := ls.client.ExpectPrompt(latest, func(resp acp.PromptResponse, err error) {
		tr.end(t, turnEnd(resp, err, false), ls.client.Position())
	})
	return t, wait, err
}

// await ends a reattached turn when the answer to its prompt comes, or
// when the connection ends without one.
func (tr *turns) await(t *turn, wait func(context.Context) (acp.PromptResponse, error)) {
	ls := tr.ls
	defer ls.turnWG.Done()
	resp, err := wait(context.Background())
	tr.end(t, turnEnd(resp, err, ls.life.stopping()), 0)
}

// servedAgain names the agent's requests the replay reads again that the
// previous daemon answered: they are not served twice.
func servedAgain(h shim.Hello) map[string]bool {
	serve := map[string]bool{}
	for _, r := range h.Requests {
		if r.End > h.From {
			if _, id, _ := acp.Classify(r.Line); id != nil {
				serve[string(id)] = true
			}
		}
	}
	return serve
}

// unansweredRequests are the agent's requests before the replay starts
// that no daemon answered: they are delivered again.
func unansweredRequests(h shim.Hello) [][]byte {
	var lines [][]byte
	for _, r := range h.Requests {
		if r.End <= h.From {
			lines = append(lines, r.Line)
		}
	}
	return lines
}
