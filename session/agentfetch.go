package session

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
	live "github.com/berth-sh/berth/session/live"
)

// An npx agent whose package is nowhere on the machine is fetched before
// its start, not by npx inside it: the download, which took 36 s on a
// cold cache, has its own timeout (config.InstallTimeout) instead of the
// handshake's, and the session's log says how it goes (agent_fetch:
// started, fetching every fetchEvery, done or failed; docs/api.md,
// Sessions, "Agents: the first start"). The session waits in starting
// meanwhile; a stop ends the fetch.

// agentFetcher is a catalog that fetches an npx agent's package ahead
// (config.Catalog).
type agentFetcher interface {
	NeedsFetch(name string) (pkg string, need bool)
	Fetch(ctx context.Context, name string) (berth.AgentSpec, error)
}

// fetchEvery is how often a fetch in progress is told, and a stop looked for.
var fetchEvery = 5 * time.Second

// stopPoll is how often a fetch looks whether its session was stopped.
const stopPoll = 100 * time.Millisecond

// needsFetch notes the package the birth's agent must fetch before its
// start ("" when none).
func (b *birth) needsFetch() {
	if f, ok := b.m.opts.Catalog.(agentFetcher); ok {
		if pkg, need := f.NeedsFetch(b.spec.Name); need {
			b.fetch = pkg
		}
	}
}

// launchAgent starts the birth's agent: once its package is fetched, when
// it must be.
func (b *birth) launchAgent(ctx context.Context) *live.Launching {
	ls := b.ls
	if b.fetch == "" {
		return ls.Launch(ctx, b.provider)
	}
	spec, err := b.fetchAgent(ctx)
	if err != nil {
		return ls.FailedLaunch(&berth.Failure{Kind: berth.FailStartup,
			Message: "fetch agent " + b.spec.Name + ": " + berth.ErrorMessage(err)})
	}
	b.spec = spec
	ls.UseSpec(spec)
	return ls.Launch(ctx, b.provider)
}

// fetchAgent fetches the agent's package, telling the session's log how
// it goes, and returns the agent's spec as it now runs.
func (b *birth) fetchAgent(ctx context.Context) (berth.AgentSpec, error) {
	ls, pkg := b.ls, b.fetch
	began := time.Now()
	tell := func(phase string, err error) {
		data := map[string]any{"package": pkg, "phase": phase, "elapsed_ms": time.Since(began).Milliseconds()}
		if err != nil {
			data["error"] = berth.ErrorMessage(err)
		}
		ls.Emit("", berth.EventAgentFetch, data)
	}
	tell("started", nil)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		spec berth.AgentSpec
		err  error
	}
	done := make(chan result, 1)
	go func() {
		spec, err := b.m.opts.Catalog.(agentFetcher).Fetch(ctx, b.spec.Name)
		done <- result{spec, err}
	}()
	poll := time.NewTicker(stopPoll)
	defer poll.Stop()
	next := time.Now().Add(fetchEvery)
	for {
		select {
		case r := <-done:
			if r.err == nil && ls.StopRequested() {
				r.err = berth.Errorf(berth.EConflict, "the session was stopped")
			}
			if r.err != nil {
				tell("failed", r.err)
				return berth.AgentSpec{}, r.err
			}
			tell("done", nil)
			return r.spec, nil
		case now := <-poll.C:
			if ls.StopRequested() {
				// npm is killed; its answer comes back as the error.
				cancel()
			}
			if now.After(next) {
				tell("fetching", nil)
				next = now.Add(fetchEvery)
			}
		}
	}
}
