package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/shim"
)

// reattach takes over one session whose agent runs on in its shim: the
// stream is replayed from the last line the log has, the turn in flight
// waits for the answer to the prompt the previous daemon sent (or sends
// it, if it never went out), and the agent's unanswered requests are
// served again. r is what the store holds of it (read for every session
// of the boot at once). Until the runtime is live every failure lets go of
// the shim, which waits on for a daemon.
func (m *Manager) reattach(ctx context.Context, s *berth.Session, r *berth.Recovery) (err error) {
	p, err := m.attachShim(ctx, s)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			p.Detach()
		}
	}()
	rt, provider, err := m.recoverRuntime(s, p)
	if err != nil {
		return err
	}
	open, in, queue, err := m.recoverOpenTurn(ctx, s, r)
	if err != nil {
		return err
	}
	elics, err := m.store.ListElicitations(ctx, s.ID, berth.ElicitationPending)
	if err != nil {
		return err
	}
	// After the claim: the open turn's entry is no longer queued.
	back, err := rt.reattach(recovered{open: open, in: in, pending: r.Pending, queue: queue, elics: elics})
	if err != nil {
		return err
	}
	if m.goLive(rt, false) != nil {
		return fmt.Errorf("session %s is live already", s.ID)
	}
	if s.ToolsHash != "" && m.toolsEnabled() {
		// The agent's `berth mcp` outlived the daemon, with its credential:
		// its socket is served again.
		if err := m.serveTools(s.ID, s.ToolsHash, provider); err != nil {
			rt.logger.Warn("serve the berth tools again", "err", err)
		}
	}
	// Live now: a shutdown that ends the boot does not cut this short.
	rt.carryOn(context.WithoutCancel(ctx), back)
	return nil
}

// recovered is what a reattached session carries on with, as the store
// has it: its open turn ("" for none) and that turn's input, its pending
// permissions and elicitations, for the agent's requests served again to
// take back, and its queued input.
type recovered struct {
	open    string
	in      input
	pending []*berth.Permission
	queue   []*berth.QueueEntry
	elics   []*berth.Elicitation
}

// reattached is a session wired to its shim again, about to carry on: the
// turn in flight (nil for none) and how it ends (wait nil: its prompt is
// still to be sent).
type reattached struct {
	hello shim.Hello
	t     *turn
	in    input
	wait  func(context.Context) (acp.PromptResponse, error)
}

// reattach wires a session whose agent runs on in its shim to it again,
// from the last line the log has, with what r recovered. Nothing runs
// yet (carryOn): a failure lets the shim go.
func (rt *runtime) reattach(r recovered) (*reattached, error) {
	rt.recoverInput(r.pending, r.queue)
	for _, e := range r.elics {
		rt.adoptableElics = append(rt.adoptableElics, *e)
	}
	rt.sess.PendingElicitations = 0
	h := rt.shim.Hello()
	rt.wire(rt.shim, acp.Options{StartOffset: h.From, LastID: h.LastID, ReplayUntil: h.End, ReplayServe: servedAgain(h)})
	t, wait, err := rt.recoverTurn(r.open, h)
	if err != nil {
		return nil, err
	}
	return &reattached{hello: h, t: t, in: r.in, wait: wait}, nil
}

// carryOn runs a reattached live session: nothing fails from here. The
// turn's runner starts before the stream does: an answer replayed at once
// ends this turn, never one dispatched after it.
func (rt *runtime) carryOn(ctx context.Context, a *reattached) {
	if t := a.t; t != nil {
		rt.turnWG.Add(1)
		if a.wait == nil {
			// The prompt never reached the agent: it goes out now.
			rt.logger.Info("resending the prompt of a turn the previous daemon did not send", "turn_id", t.id)
			go rt.runTurn(t, a.in)
		} else {
			go rt.awaitTurn(t, a.wait)
		}
	}
	rt.run(unansweredRequests(a.hello))
	close(rt.ready)
	close(rt.handshook)
	if a.t == nil && a.hello.Exited == nil {
		// What was queued runs now; an agent that has exited runs nothing
		// (the session stops, and resumes for its queue).
		rt.mu.Lock()
		rt.dispatchLocked(ctx)
		rt.mu.Unlock()
	}
	rt.logger.Debug("session reattached", "from", a.hello.From, "end", a.hello.End, "turn_open", a.t != nil)
}

// attachShim connects to the session's shim, from the stream offset the
// session has, and checks that it serves the session.
func (m *Manager) attachShim(ctx context.Context, s *berth.Session) (*shim.Proc, error) {
	actx, cancel := context.WithTimeout(ctx, reattachTimeout)
	defer cancel()
	p, err := shim.Attach(actx, s.ShimSocket, s.AgentOffset)
	if err != nil {
		return nil, err
	}
	if id := p.Hello().SessionID; id != s.ID {
		p.Detach()
		return nil, fmt.Errorf("the shim at %s serves session %s", s.ShimSocket, id)
	}
	return p, nil
}

// recoverRuntime builds the runtime of a session whose agent runs in the
// shim p, with its sandbox as the shim opened it, and returns its provider.
func (m *Manager) recoverRuntime(s *berth.Session, p *shim.Proc) (*runtime, berth.SandboxProvider, error) {
	provider := m.providers[s.Sandbox.Provider]
	if provider == nil {
		return nil, nil, fmt.Errorf("sandbox provider %q is not configured", s.Sandbox.Provider)
	}
	spec, ok := m.opts.Catalog.Get(s.Agent)
	if !ok {
		spec = berth.AgentSpec{Name: s.Agent}
	}
	return m.newRuntime(liveConfig{session: s, spec: spec, shim: p, provider: provider, box: m.sandboxConfig(s, spec)}), provider, nil
}

// recoverInput takes what a reattached runtime carries on with: its
// pending permissions, for the agent's requests served again to take
// back, and its queued input.
func (rt *runtime) recoverInput(pending []*berth.Permission, queue []*berth.QueueEntry) {
	for _, p := range pending {
		rt.adoptable = append(rt.adoptable, *p)
	}
	rt.sess.PendingPermissions = 0
	rt.takeInput(queue)
}

// recoverOpenTurn returns the session's open turn, if any, and its text,
// claiming the queue entry it runs when the previous daemon died before it
// did; queue is the session's pending entries without it.
func (m *Manager) recoverOpenTurn(ctx context.Context, s *berth.Session, r *berth.Recovery) (open string, in input, queue []*berth.QueueEntry, err error) {
	queue = r.Queue
	if r.OpenTurn == nil {
		return "", input{}, queue, nil
	}
	var started turnStartedData
	_ = json.Unmarshal(r.OpenTurn.Data, &started)
	claimed, err := m.claimOpenTurnEntry(ctx, s, r.OpenTurn.TurnID, started, queue)
	if err != nil {
		return "", input{}, nil, err
	}
	if claimed != "" {
		queue = slices.DeleteFunc(slices.Clone(queue), func(e *berth.QueueEntry) bool { return e.ID == claimed })
	}
	return r.OpenTurn.TurnID, started.input(), queue, nil
}

// recoverTurn sets up the turn in flight, open, of a wired runtime: it
// waits for the answer to the latest prompt the agent has not answered (a
// steer's follow-up is a later prompt), or, when no prompt went out, wait
// is nil and the turn's prompt is to be sent.
func (rt *runtime) recoverTurn(open string, h shim.Hello) (*turn, func(context.Context) (acp.PromptResponse, error), error) {
	// The output so far is counted where the shim counted it. A turn's
	// drops the shim reports when the turn ends; those between turns it
	// reported at the first, which a daemon has warned of.
	rt.out = outputWindow{turnID: open, recorded: h.OutputKept, truncated: h.OutputTruncated,
		warned: open == "" && h.OutputTruncated}
	if open == "" {
		return nil, nil, nil
	}
	t := &turn{id: open, done: make(chan struct{}), promptSent: make(chan struct{})}
	rt.turn, rt.lastActivity = t, time.Now()
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
	wait, err := rt.client.ExpectPrompt(latest, func(resp acp.PromptResponse, err error) {
		rt.endTurn(t, turnEnd(resp, err, false), rt.linePos())
	})
	return t, wait, err
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

// awaitTurn ends a reattached turn when the answer to its prompt comes, or
// when the connection ends without one.
func (rt *runtime) awaitTurn(t *turn, wait func(context.Context) (acp.PromptResponse, error)) {
	defer rt.turnWG.Done()
	resp, err := wait(context.Background())
	rt.endTurn(t, turnEnd(resp, err, rt.stopping()), 0)
}

// claimOpenTurnEntry claims the queue entry of a turn whose turn_started
// was logged by a daemon that died before it claimed the entry: the turn
// runs it, and it never runs a second time. It returns the id of the entry
// it claimed, if any; pending is the session's pending entries.
func (m *Manager) claimOpenTurnEntry(ctx context.Context, s *berth.Session, turnID string, d turnStartedData, pending []*berth.QueueEntry) (string, error) {
	if d.EntryID == "" {
		return "", nil
	}
	kind := berth.EntryQueue
	if d.Source == berth.SourceSteer {
		kind = berth.EntrySteer
	}
	for _, e := range pending {
		if e.ID != d.EntryID {
			continue
		}
		// It is its kind's oldest of its generation: it was when the turn was logged.
		got, err := m.store.ClaimQueueEntry(ctx, s.ID, kind, e.Generation, turnID)
		if err != nil {
			return "", err
		}
		if got.ID != e.ID {
			m.logger.Error("claimed another entry than the open turn's", "session_id", s.ID, "turn_id", turnID, "want", e.ID, "got", got.ID)
		}
		return got.ID, nil
	}
	return "", nil
}

// removeOrphanShims clears $BERTH_HOME/run of what the previous daemon
// left that belongs to no live session: a shim still answering is told to
// stop its agent and go, one that does not is killed (found by its pid
// file), and the files of both are removed. left is the run directory as
// Open found it: what sessions of this daemon made since is theirs.
func (m *Manager) removeOrphanShims(ctx context.Context, left runDirLeft) {
	for b, id := range left.bundles {
		if m.runtimeOf(id) != nil {
			continue
		}
		m.endOrphanShim(ctx, b, id)
	}
	for _, b := range left.strays {
		m.endOrphanShim(ctx, b, "")
	}
}

// endOrphanShim ends the shim of a session that is not live: one still
// answering is told to stop its agent and go, one that does not is killed
// (found by its pid file), and its files are removed.
func (m *Manager) endOrphanShim(ctx context.Context, b shim.Bundle, id string) {
	actx, cancel := context.WithTimeout(ctx, time.Second)
	p, err := shim.Attach(actx, b.Socket, 0)
	cancel()
	if err == nil {
		if id != "" && p.Hello().SessionID != id {
			p.Detach()
			return
		}
		m.logger.Warn("stopping an orphaned shim", "session_id", p.Hello().SessionID)
		p.Discard()
		_, _ = p.Stop(context.Background(), m.opts.Limits.StopGrace)
		p.Release()
	} else if pid := shim.ReadPID(b.PIDFile, m.opts.RunDir); pid > 0 {
		m.logger.Warn("killing an orphaned shim", "session_id", id, "pid", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	b.Remove(true)
}
