package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/daemon"
)

// promptFloorResult is how far berth's prompt path is from the agent's:
// the workspace its sessions' checkpoints took, the pause between a
// session's prompts, and the time berth adds at p50.
type promptFloorResult struct {
	WorkspaceFiles int     `json:"workspace_files,omitempty"`
	PromptGapMs    float64 `json:"prompt_gap_ms,omitempty"`
	// AgentEventAddedP50Ms is prompt → first agent event through berth
	// minus the same with the agent prompted directly, at p50.
	AgentEventAddedP50Ms float64 `json:"prompt_first_agent_event_added_p50_ms,omitempty"`
}

// atOnceResult is what --prompts-at-once reports: prompts sent at once to
// as many sessions of a daemon holding --sessions live ones, with
// checkpoints on, beside a daemon with them off in the same run.
type atOnceResult struct {
	Machine string `json:"machine"`
	AtOnce  int    `json:"at_once"`
	Live    int    `json:"live_sessions"`
	Rounds  int    `json:"rounds"`
	Files   int    `json:"workspace_files"`
	// OnP50Ms/OnP99Ms: prompt → first agent event, checkpoints on;
	// OffP50Ms/OffP99Ms the same with checkpoints off.
	OnP50Ms  float64 `json:"first_agent_event_checkpoints_on_p50_ms"`
	OnP99Ms  float64 `json:"first_agent_event_checkpoints_on_p99_ms"`
	OffP50Ms float64 `json:"first_agent_event_checkpoints_off_p50_ms"`
	OffP99Ms float64 `json:"first_agent_event_checkpoints_off_p99_ms"`
	Ratio    float64 `json:"checkpoints_on_over_off_p50"`
	Load     float64 `json:"load_average"`
}

// atOnceSide is one daemon of the bench, with the probes of the sessions
// it prompts at once.
type atOnceSide struct {
	d      *daemon.Daemon
	c      *bclient.Client
	home   string
	probes []*promptProbe
	took   []time.Duration
}

// runAtOnce opens two daemons of fl.sessions live demo sessions each,
// checkpoints on and off (created in turns), and sends k prompts at once
// to k sessions of each, fl.prompts rounds interleaved, fl.gap apart (the sessions' next
// checkpoints are taken meanwhile, as between a user's prompts), each
// prompted session's workspace holding fl.files files. profile, when not
// "", is where a CPU profile of the rounds is written.
func (b *bench) runAtOnce(ctx context.Context, fl benchFlags, k int, profile string, asJSON bool, out, progress io.Writer) error {
	files, gap := fl.files, fl.gap
	res := atOnceResult{Machine: machine(), AtOnce: k, Live: fl.sessions, Rounds: fl.prompts, Files: files}
	sides := make([]*atOnceSide, 2)
	defer func() {
		for _, s := range sides {
			if s != nil {
				s.close(ctx)
			}
		}
	}()
	for i, on := range []bool{true, false} {
		s, err := b.openAtOnceSide(ctx, fl, on)
		sides[i] = s
		if err != nil {
			return err
		}
	}
	// The two daemons' sessions are created in turns of atOnceBatch: with
	// one daemon's all made first, its prompts came out 7–12% slower with
	// the two daemons alike.
	fmt.Fprintf(progress, "two daemons of %d live sessions each, checkpoints on and off…\n", fl.sessions)
	for made := 0; made < fl.sessions; made += atOnceBatch {
		for _, s := range sides {
			if err := createMany(ctx, s.c, fl.sandbox, min(atOnceBatch, fl.sessions-made)); err != nil {
				return err
			}
		}
	}
	for _, s := range sides {
		if err := s.openProbes(ctx, k, files); err != nil {
			return err
		}
	}
	// One round each first, not counted: a session's first prompt finds
	// its agent and the daemon's paths cold, and the side that went first
	// in the run came out 5–10% slower with the two alike (checkpoints off
	// on both).
	for _, s := range sides {
		if err := s.fire(ctx); err != nil {
			return err
		}
		s.took = s.took[:0]
		time.Sleep(gap)
	}
	fmt.Fprintf(progress, "%d rounds of %d prompts at once on each…\n", fl.prompts, k)
	if profile != "" {
		// Both daemons run in this process: the profile holds the two.
		stop, err := StartCPUProfile(profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	for r := range fl.prompts {
		for j := range sides {
			// Each goes first in every other round.
			if err := sides[(r+j)%2].fire(ctx); err != nil {
				return err
			}
			time.Sleep(gap)
		}
	}
	res.OnP50Ms, res.OnP99Ms = pct(sides[0].took, 50), pct(sides[0].took, 99)
	res.OffP50Ms, res.OffP99Ms = pct(sides[1].took, 50), pct(sides[1].took, 99)
	res.Ratio = ratio(res.OnP50Ms, res.OffP50Ms)
	res.Load = loadAverage()
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	t := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(t, "machine\t%s\n", res.Machine)
	fmt.Fprintf(t, "%d prompts at once, %d live sessions, %d rounds, %d files a workspace\n", k, fl.sessions, fl.prompts, files)
	fmt.Fprintf(t, "prompt→first agent event, checkpoints on\tp50 %.2f ms\tp99 %.2f ms\n", res.OnP50Ms, res.OnP99Ms)
	fmt.Fprintf(t, "  checkpoints off\tp50 %.2f ms\tp99 %.2f ms\ton %.2f×\n", res.OffP50Ms, res.OffP99Ms, res.Ratio)
	fmt.Fprintf(t, "load average\t%.2f\n", res.Load)
	return t.Flush()
}

// atOnceBatch is how many sessions one daemon of the bench is given
// before the other is given as many.
const atOnceBatch = 25

// openAtOnceSide opens a daemon with checkpoints on or off.
func (b *bench) openAtOnceSide(ctx context.Context, fl benchFlags, checkpoints bool) (*atOnceSide, error) {
	home, cfg, err := tempHome("berth-bench-atonce-", fl.storeURL)
	if err != nil {
		return nil, err
	}
	s := &atOnceSide{home: home}
	cfg.Checkpoints.Enabled = checkpoints
	cfg.Limits.MaxSessions = max(cfg.Limits.MaxSessions, fl.sessions+2)
	if s.d, err = b.openDaemon(ctx, daemon.Options{Home: home, Config: cfg, Logger: quietLogger().With("daemon", "bench-atonce")}); err != nil {
		return s, err
	}
	s.c, err = s.d.Client()
	return s, err
}

// openProbes gives k of the side's sessions a workspace of files files
// and opens their probes.
func (s *atOnceSide) openProbes(ctx context.Context, k, files int) error {
	list, err := s.c.ListSessions(ctx, berth.SessionFilter{Limit: k})
	if err != nil {
		return err
	}
	if len(list.Sessions) < k {
		return fmt.Errorf("%d sessions listed, want %d", len(list.Sessions), k)
	}
	for _, sess := range list.Sessions[:k] {
		if err := fillWorkspace(sess.Workspace, files); err != nil {
			return err
		}
		p, err := openPromptProbe(ctx, s.c, sess.ID)
		if err != nil {
			return err
		}
		s.probes = append(s.probes, p)
	}
	return nil
}

// fire sends one prompt to each probe's session at once and records the
// time to each one's first agent event.
func (s *atOnceSide) fire(ctx context.Context) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := make(chan struct{})
	for _, p := range s.probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, agent, err := p.prompt(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				firstErr = err
				return
			}
			s.took = append(s.took, agent)
		}()
	}
	close(start)
	wg.Wait()
	return firstErr
}

// close ends the probes, closes the daemon and removes its home.
func (s *atOnceSide) close(ctx context.Context) {
	for _, p := range s.probes {
		p.close()
	}
	if s.c != nil {
		s.c.Close()
	}
	if s.d != nil {
		closeBenchDaemon(ctx, s.d)
	}
	os.RemoveAll(s.home)
}
