package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/changefeed"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/daemon"
)

// fanoutResult is what the all-sessions stream fan-out measures: subs
// readers of GET /v1/events/stream while every bench session runs turns.
type fanoutResult struct {
	FanoutSubscribers int     `json:"fanout_subscribers,omitempty"`
	FanoutSessions    int     `json:"fanout_sessions,omitempty"`
	FanoutSeconds     float64 `json:"fanout_seconds,omitempty"`
	// FanoutChanges is how many changes the daemon published meanwhile,
	// FanoutDelivered how many the subscribers received in all.
	FanoutChanges   int64   `json:"fanout_changes,omitempty"`
	FanoutDelivered int64   `json:"fanout_delivered,omitempty"`
	FanoutPerSec    float64 `json:"fanout_delivered_per_sec,omitempty"`
	// FanoutLatency* run from the change's publication to its delivery to
	// one subscriber over HTTP.
	FanoutLatencyP50Ms float64 `json:"fanout_latency_p50_ms,omitempty"`
	FanoutLatencyP99Ms float64 `json:"fanout_latency_p99_ms,omitempty"`
	FanoutResyncs      int64   `json:"fanout_resyncs"`
	// FanoutAgentEvents is what the sessions logged meanwhile, per second.
	FanoutAgentEventsPerSec float64 `json:"fanout_agent_events_per_sec,omitempty"`
}

// fanoutFlood is the turn every session runs over and over during the
// fan-out: enough events that activity is coalesced, short enough that
// turns (running → idle) come often.
const fanoutFlood = "flood 500 64"

// benchFanout opens subs HTTP readers of the all-sessions stream, makes
// every session in ids run turns for dur, and measures how fast and how
// soon the changes reach every reader. Publication time is taken by a
// reader inside the daemon's process, woken by the publication itself.
func benchFanout(ctx context.Context, c *bclient.Client, d *daemon.Daemon, sandbox string, ids []string, subs int, dur time.Duration, res *fanoutResult, progress io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ref, err := d.Manager().StreamChanges(ctx, "")
	if err != nil {
		return err
	}
	defer ref.Close()
	var (
		refMu    sync.Mutex
		refAt    = map[string]time.Time{}
		refLast  string
		refWG    sync.WaitGroup
		refReady = make(chan struct{})
	)
	refWG.Add(1)
	go func() {
		defer refWG.Done()
		for {
			cs, err := ref.Next(ctx)
			if err != nil {
				return
			}
			now := time.Now()
			refMu.Lock()
			for _, ch := range cs {
				refAt[ch.ID] = now
				if refLast == "" {
					close(refReady)
				}
				refLast = ch.ID
			}
			refMu.Unlock()
		}
	}()
	defer func() {
		cancel()
		refWG.Wait()
	}()

	// A marker change gives the position every reader resumes from, so a
	// reader that connects late still gets every change of the run.
	marker, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: sandbox})
	if err != nil {
		return err
	}
	defer c.DeleteSession(context.WithoutCancel(ctx), marker.ID)
	select {
	case <-refReady:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("bench: the change stream published nothing for a new session")
	}
	refMu.Lock()
	start := refLast
	refMu.Unlock()

	type delivery struct {
		id string
		at time.Time
	}
	got := make([][]delivery, subs)
	var resyncs atomic.Int64
	// lastSeen is, per reader, the seq of the newest change it received.
	lastSeen := make([]atomic.Int64, subs)
	var subWG sync.WaitGroup
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	for i := range subs {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			for ch, err := range c.Changes(subCtx, start) {
				if err != nil {
					return
				}
				if ch.Type == berth.ChangeResync {
					resyncs.Add(1)
				}
				got[i] = append(got[i], delivery{ch.ID, time.Now()})
				if _, seq, err := changefeed.ParseID(ch.ID); err == nil {
					lastSeen[i].Store(seq)
				}
			}
		}()
	}

	fmt.Fprintf(progress, "%d sessions run %q turns for %s, %d readers follow /v1/events/stream…\n", len(ids), fanoutFlood, dur, subs)
	logged0 := loggedEvents(ctx, c, ids)
	t0 := time.Now()
	loadCtx, stopLoad := context.WithTimeout(ctx, dur)
	defer stopLoad()
	var loadWG sync.WaitGroup
	loadErr := make(chan error, len(ids))
	for _, id := range ids {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			for loadCtx.Err() == nil {
				if _, err := c.PromptWait(ctx, id, berth.PromptRequest{Text: fanoutFlood}); err != nil {
					loadErr <- err
					return
				}
			}
		}()
	}
	loadWG.Wait()
	elapsed := time.Since(t0)
	select {
	case err := <-loadErr:
		return err
	default:
	}
	logged := loggedEvents(ctx, c, ids) - logged0

	// Let every reader catch up with the last change of the run.
	refMu.Lock()
	end := refLast
	refMu.Unlock()
	_, endSeq, _ := changefeed.ParseID(end)
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < subs && time.Now().Before(deadline); {
		if lastSeen[i].Load() >= endSeq {
			i++
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopSubs()
	subWG.Wait()

	refMu.Lock()
	defer refMu.Unlock()
	var lats []time.Duration
	var delivered int64
	lastAt := t0
	for _, ds := range got {
		delivered += int64(len(ds))
		for _, dl := range ds {
			if dl.at.After(lastAt) {
				lastAt = dl.at
			}
			if at, ok := refAt[dl.id]; ok {
				lats = append(lats, dl.at.Sub(at))
			}
		}
	}
	_, first, _ := changefeed.ParseID(start)
	// Delivered per second over the run and the readers' catch-up.
	span := lastAt.Sub(t0).Seconds()
	*res = fanoutResult{FanoutSubscribers: subs, FanoutSessions: len(ids), FanoutSeconds: elapsed.Seconds(),
		FanoutChanges: endSeq - first, FanoutDelivered: delivered, FanoutPerSec: float64(delivered) / span,
		FanoutLatencyP50Ms: pct(lats, 50), FanoutLatencyP99Ms: pct(lats, 99), FanoutResyncs: resyncs.Load(),
		FanoutAgentEventsPerSec: float64(logged) / elapsed.Seconds()}
	return nil
}

// loggedEvents sums the last seq of the sessions.
func loggedEvents(ctx context.Context, c *bclient.Client, ids []string) int64 {
	var n int64
	for _, id := range ids {
		if s, err := c.GetSession(ctx, id); err == nil {
			n += s.LastSeq
		}
	}
	return n
}
