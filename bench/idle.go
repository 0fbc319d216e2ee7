package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/internal/procfs"
)

// idleResult is what the idle bench measures: the CPU that n idle
// sessions cost over a window, as a percentage of one core, beside the
// same number of the agent started directly (the floor: an idle agent's
// own cost) in the same window.
type idleResult struct {
	Machine  string  `json:"machine"`
	Sandbox  string  `json:"sandbox"`
	Sessions int     `json:"idle_sessions"`
	Seconds  float64 `json:"idle_seconds"`
	// DaemonPct and ShimsPct are berth's own: the daemon and its shims,
	// spare included. BerthPct is both.
	DaemonPct float64 `json:"idle_daemon_core_pct"`
	ShimsPct  float64 `json:"idle_shims_core_pct"`
	BerthPct  float64 `json:"idle_berth_core_pct"`
	// AgentsPct is every process the shims started (the agents, and any
	// sandbox helper); DirectAgentsPct is as many agents started with no
	// berth, measured in the same window.
	AgentsPct       float64 `json:"idle_agents_core_pct"`
	DirectAgentsPct float64 `json:"idle_direct_agents_core_pct"`
	// ShimSwitchesPerMin is the context switches of one shim (all its
	// threads) a minute, averaged over the shims: how often it wakes.
	ShimSwitchesPerMin   float64 `json:"idle_shim_switches_per_min"`
	DaemonSwitchesPerMin float64 `json:"idle_daemon_switches_per_min"`
	LoadAverage          float64 `json:"load_average"`
	// Shims, AgentProcs and DirectProcs count the processes measured.
	Shims       int `json:"idle_shims"`
	AgentProcs  int `json:"idle_agent_procs"`
	DirectProcs int `json:"idle_direct_procs"`
}

// idleSettle is how long the idle bench lets the sessions settle (the
// creates' aftermath: spare shims, the store's writes, the first spool
// ack of each shim) before it measures.
const idleSettle = 15 * time.Second

// runIdleBench creates n demo sessions in a `berth serve` of its own,
// starts n demo agents directly beside them, lets all settle, and
// measures the CPU time each group uses over the window from /proc.
func runIdleBench(ctx context.Context, o benchBootOptions, n int, window time.Duration, asJSON bool, out, progress io.Writer) error {
	home, cfg, err := tempHome("berth-bench-idle-", "")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	if err := writeBenchConfig(home, n+1, true); err != nil {
		return err
	}
	srv, err := serveHealthy(ctx, o, home)
	if err != nil {
		return err
	}
	defer func() { _ = srv.stop(3 * time.Minute) }()
	fmt.Fprintf(progress, "creating %d sessions, and as many agents started directly…\n", n)
	direct := &directAgents{}
	defer direct.close()
	if err := createIdle(ctx, srv, cfg, o.sandbox, direct, n); err != nil {
		return err
	}
	time.Sleep(idleSettle)

	runDir := filepath.Join(home, "run")
	shims := runShims(runDir)
	groups := idleGroups{daemon: []int{srv.cmd.Process.Pid}, shims: shims, agents: processTree(shims)[len(shims):]}
	for _, a := range direct.agents {
		groups.direct = append(groups.direct, a.cmd.Process.Pid)
	}
	groups.direct = processTree(groups.direct)
	fmt.Fprintf(progress, "measuring %d idle sessions for %s…\n", n, window)
	before := groups.sample()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(window):
	}
	after := groups.sample()

	res := idleResult{Machine: machine(), Sandbox: o.sandbox, Sessions: n, LoadAverage: loadAverage(),
		Seconds: after.daemon.at.Sub(before.daemon.at).Seconds()}
	// Each group over its own window: reading thousands of processes'
	// /proc takes seconds on a loaded machine.
	pct := func(a, b idleUse) float64 { return 100 * (b.cpu - a.cpu).Seconds() / b.at.Sub(a.at).Seconds() }
	perMin := func(a, b idleUse, procs int) float64 {
		return float64(b.switches-a.switches) / float64(max(procs, 1)) / b.at.Sub(a.at).Minutes()
	}
	res.DaemonPct = pct(before.daemon, after.daemon)
	res.ShimsPct = pct(before.shims, after.shims)
	res.BerthPct = res.DaemonPct + res.ShimsPct
	res.AgentsPct = pct(before.agents, after.agents)
	res.DirectAgentsPct = pct(before.direct, after.direct)
	res.Shims, res.AgentProcs, res.DirectProcs = len(groups.shims), len(groups.agents), len(groups.direct)
	res.ShimSwitchesPerMin = perMin(before.shims, after.shims, len(shims))
	res.DaemonSwitchesPerMin = perMin(before.daemon, after.daemon, 1)
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	printIdle(out, res)
	return nil
}

// idleBatch is how many sessions the idle bench creates before it starts
// as many agents directly: the two groups are of an age (a Go agent's
// runtime does work minutes after it started, a forced GC every 2 min).
const idleBatch = 50

// createIdle creates n demo sessions and starts n demo agents directly
// into direct, a batch of each in turn.
func createIdle(ctx context.Context, srv *benchServe, cfg *config.Config, sandbox string, direct *directAgents, n int) error {
	spec, err := directCatalogAgent(cfg, "demo")
	if err != nil {
		return err
	}
	if direct.root, err = os.MkdirTemp("", "berth-bench-direct-"); err != nil {
		return err
	}
	for done := 0; done < n; {
		k := min(idleBatch, n-done)
		if err := createMany(ctx, srv.c, sandbox, k); err != nil {
			return err
		}
		for range k {
			a, _, err := startDirect(spec, direct.root, berth.SandboxHost)
			if err != nil {
				return err
			}
			direct.agents = append(direct.agents, a)
		}
		done += k
	}
	return nil
}

// idleGroups are the processes the idle bench measures, by group.
type idleGroups struct{ daemon, shims, agents, direct []int }

// idleUse is what a group of processes had used at a moment.
type idleUse struct {
	at       time.Time
	cpu      time.Duration
	switches int64
}

// idleSample is every group's use at one moment.
type idleSample struct{ daemon, shims, agents, direct idleUse }

// sample reads every group's use; a process gone by then is left out.
func (g idleGroups) sample() idleSample {
	return idleSample{daemon: use(g.daemon), shims: use(g.shims), agents: use(g.agents), direct: use(g.direct)}
}

// use sums the CPU time and context switches of pids.
func use(pids []int) idleUse {
	u := idleUse{at: time.Now()}
	for _, pid := range pids {
		if cpu, err := procCPU(pid); err == nil {
			u.cpu += cpu
		}
		if n, err := procfs.ContextSwitches(pid); err == nil {
			u.switches += n
		}
	}
	return u
}

// printIdle writes the idle bench's figures as a table.
func printIdle(w io.Writer, r idleResult) {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(t, "machine\t%s\n", r.Machine)
	fmt.Fprintf(t, "%d idle %s sessions over %.0f s\t%% of a core\n", r.Sessions, r.Sandbox, r.Seconds)
	fmt.Fprintf(t, "  daemon and shims\t%.3f\t(daemon %.3f, shims %.3f)\n", r.BerthPct, r.DaemonPct, r.ShimsPct)
	fmt.Fprintf(t, "  their agents\t%.3f\t(%d shims, %d processes under them)\n", r.AgentsPct, r.Shims, r.AgentProcs)
	fmt.Fprintf(t, "  as many agents started directly\t%.3f\t(%d processes)\n", r.DirectAgentsPct, r.DirectProcs)
	fmt.Fprintf(t, "context switches a minute\tshim %.2f\tdaemon %.0f\n", r.ShimSwitchesPerMin, r.DaemonSwitchesPerMin)
	fmt.Fprintf(t, "load average\t%.2f\n", r.LoadAverage)
	t.Flush()
}
