package session

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/shim"

	live "github.com/berth-sh/berth/session/live"
)

// reattach takes over one session whose agent runs on in its shim: the
// stream is replayed from the last line the log has, the turn in flight
// waits for the answer to the prompt the previous daemon sent (or sends
// it, if it never went out), and the agent's unanswered requests are
// served again. r is what the store holds of it (read for every session
// of the boot at once). Until the session is live every failure lets go of
// the shim, which waits on for a daemon.
func (rc *recovery) reattach(ctx context.Context, s *berth.Session, r *berth.Recovery) error {
	b := rc.m.newBirth(root{})
	b.s = s
	var p *shim.Proc
	var back *live.Reattached
	err := b.run(ctx,
		stage{"attach", func(ctx context.Context) (err error) { p, err = b.attach(ctx); return err }},
		stage{"recover", func(ctx context.Context) (err error) { back, err = b.recover(ctx, p, r); return err }},
		stage{"live", func(context.Context) error {
			if rc.m.set.goLive(b.ls, false) != nil {
				return fmt.Errorf("session %s is live already", s.ID)
			}
			return nil
		}},
	)
	if err != nil {
		return err
	}
	if s.ToolsHash != "" && rc.m.tools.enabled() {
		// The agent's `berth mcp` outlived the daemon, with its credential:
		// its socket is served again, once the boot's sessions are all
		// reattached.
		rc.m.tools.serveAfterBoot(s.ID, s.ToolsHash, b.provider)
	}
	if spec, ok := rc.m.opts.Catalog.Get(s.Agent); ok {
		// The agent kept the key it was given: the gateway honours it again.
		rc.m.models.grant(s, spec, b.provider)
	}
	// So does its HTTP_PROXY the egress proxy, with the hosts it was allowed.
	rc.m.net.grant(s, b.provider)
	// Live now: a shutdown that ends the boot does not cut this short.
	b.ls.CarryOn(context.WithoutCancel(ctx), back)
	return nil
}

// attach connects to the session's shim; until the session is live, a
// failure lets go of it (the shim waits on for a daemon).
func (b *birth) attach(ctx context.Context) (*shim.Proc, error) {
	p, err := b.m.recovery.attachShim(ctx, b.s)
	if err != nil {
		return nil, err
	}
	b.onFail(p.Detach)
	return p, nil
}

// recover makes the live session of a session whose agent runs on in the
// shim p, wired to it again with what the store has (r): its open turn,
// whose queue entry it claims when the previous daemon died before it
// did, its pending asks and its queue.
func (b *birth) recover(ctx context.Context, p *shim.Proc, r *berth.Recovery) (*live.Reattached, error) {
	m, s := b.m, b.s
	var err error
	if b.ls, b.provider, err = m.recovery.recoverLive(s, p); err != nil {
		return nil, err
	}
	open, in, queue, err := m.recovery.recoverOpenTurn(ctx, s, r)
	if err != nil {
		return nil, err
	}
	// After the claim: the open turn's entry is no longer queued.
	return b.ls.Reattach(live.Recovered{Open: open, In: in, Pending: r.Pending, Queue: queue, Elics: r.Elicitations})
}

// attachShim connects to the session's shim, from the stream offset the
// session has, and checks that it serves the session.
func (rc *recovery) attachShim(ctx context.Context, s *berth.Session) (*shim.Proc, error) {
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

// recoverLive builds the live session of a session whose agent runs in the
// shim p, with its sandbox as the shim opened it, and returns its provider.
func (rc *recovery) recoverLive(s *berth.Session, p *shim.Proc) (*live.Session, berth.SandboxProvider, error) {
	provider := rc.m.providers[s.Sandbox.Provider]
	if provider == nil {
		return nil, nil, fmt.Errorf("sandbox provider %q is not configured", s.Sandbox.Provider)
	}
	spec, ok := rc.m.opts.Catalog.Get(s.Agent)
	if !ok {
		spec = berth.AgentSpec{Name: s.Agent}
	}
	return rc.m.newLive(live.Config{Session: s, Spec: spec, Shim: p, Provider: provider, Box: rc.m.place.sandboxConfig(s, spec),
		Beside: rc.m.net.beside(s, provider)}), provider, nil
}

// recoverOpenTurn returns the session's open turn, if any, and its text,
// claiming the queue entry it runs when the previous daemon died before it
// did; queue is the session's pending entries without it.
func (rc *recovery) recoverOpenTurn(ctx context.Context, s *berth.Session, r *berth.Recovery) (open string, in live.Input, queue []*berth.QueueEntry, err error) {
	queue = r.Queue
	if r.OpenTurn == nil {
		return "", live.Input{}, queue, nil
	}
	var started live.TurnStartedData
	_ = json.Unmarshal(r.OpenTurn.Data, &started)
	claimed, err := rc.claimOpenTurnEntry(ctx, s, r.OpenTurn.TurnID, started, queue)
	if err != nil {
		return "", live.Input{}, nil, err
	}
	if claimed != "" {
		queue = slices.DeleteFunc(slices.Clone(queue), func(e *berth.QueueEntry) bool { return e.ID == claimed })
	}
	return r.OpenTurn.TurnID, started.Input(), queue, nil
}

// claimOpenTurnEntry claims the queue entry of a turn whose turn_started
// was logged by a daemon that died before it claimed the entry: the turn
// runs it, and it never runs a second time. It returns the id of the entry
// it claimed, if any; pending is the session's pending entries.
func (rc *recovery) claimOpenTurnEntry(ctx context.Context, s *berth.Session, turnID string, d live.TurnStartedData, pending []*berth.QueueEntry) (string, error) {
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
		got, err := rc.m.store.ClaimQueueEntry(ctx, s.ID, kind, e.Generation, turnID)
		if err != nil {
			return "", err
		}
		if got.ID != e.ID {
			rc.m.logger.Error("claimed another entry than the open turn's", "session_id", s.ID, "turn_id", turnID, "want", e.ID, "got", got.ID)
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
func (rc *recovery) removeOrphanShims(ctx context.Context, left runDirLeft) {
	for b, id := range left.bundles {
		if rc.m.set.liveOf(id) != nil {
			continue
		}
		rc.endOrphanShim(ctx, b, id)
	}
	for _, b := range left.strays {
		rc.endOrphanShim(ctx, b, "")
	}
}

// endOrphanShim ends the shim of a session that is not live: one still
// answering is told to stop its agent and go, one that does not is killed
// (found by its pid file), and its files are removed.
func (rc *recovery) endOrphanShim(ctx context.Context, b shim.Bundle, id string) {
	actx, cancel := context.WithTimeout(ctx, time.Second)
	p, err := shim.Attach(actx, b.Socket, 0)
	cancel()
	if err == nil {
		if id != "" && p.Hello().SessionID != id {
			p.Detach()
			return
		}
		rc.m.logger.Warn("stopping an orphaned shim", "session_id", p.Hello().SessionID)
		p.Discard()
		_, _ = p.Stop(context.Background(), rc.m.opts.Limits.StopGrace)
		p.Release()
	} else if pid := shim.KillByPIDFile(b.PIDFile, rc.m.opts.RunDir); pid > 0 {
		rc.m.logger.Warn("killed an orphaned shim", "session_id", id, "pid", pid)
	}
	b.Remove(true)
}
