package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
)

// footprintResult is what `berth bench --footprint N` measures: the memory
// of every process of N idle demo sessions against N demo agents started
// directly (exec and the ACP handshake, no berth), in the same run,
// alternating the two, each round apart so that the one does not share the
// other's pages. Figures are KiB, each [smallest, median, largest] over
// the rounds.
//
// PSS (smaps_rollup's Pss) is the figure that counts: a page that n
// processes map is counted 1/n in each, so the sums add up to what the
// machine pays, however many shims share the pages of one program. RSS
// counts such a page in full in every process, so a sum of RSS overstates
// what many processes of one binary cost; it is given beside.
type footprintResult struct {
	Sessions int `json:"footprint_sessions"`
	Rounds   int `json:"footprint_rounds"`
	// ShimProgram is what the sessions' shims run: "berth-shim" (the
	// small one), "berth shim-local" or "berth shim" (the berth binary
	// itself).
	ShimProgram string `json:"footprint_shim_program"`
	// Direct* are the N agents alone; Sessions* every process of the N
	// sessions: the daemon, its shims (spare included), the agents.
	DirectPSSKB   [3]int64 `json:"footprint_direct_pss_kb"`
	SessionsPSSKB [3]int64 `json:"footprint_sessions_pss_kb"`
	DirectRSSKB   [3]int64 `json:"footprint_direct_rss_kb"`
	SessionsRSSKB [3]int64 `json:"footprint_sessions_rss_kb"`
	// OwnPSSPerSessionKB is (sessions − direct) / N: what berth adds to
	// each agent, its daemon's share included. OwnRSSPerSessionKB is the
	// same with RSS.
	OwnPSSPerSessionKB [3]int64 `json:"footprint_own_pss_per_session_kb"`
	OwnRSSPerSessionKB [3]int64 `json:"footprint_own_rss_per_session_kb"`
	// OwnMarginalPSSPerSessionKB is what each further session adds: the
	// same difference taken at N and at N/4 sessions (and agents), its
	// growth divided by the sessions between. The daemon's fixed part,
	// and the pages of the binary that the daemon and the agents share,
	// cancel out; it is the figure that holds at any N.
	OwnMarginalPSSPerSessionKB [3]int64 `json:"footprint_own_marginal_pss_per_session_kb"`
	BaseSessions               int      `json:"footprint_base_sessions"`
	// Shim* are one shim's own figures, the median over the shims.
	ShimPSSKB     [3]int64 `json:"footprint_shim_pss_kb"`
	ShimRSSKB     [3]int64 `json:"footprint_shim_rss_kb"`
	ShimAnonKB    [3]int64 `json:"footprint_shim_anon_kb"`
	DaemonPSSKB   [3]int64 `json:"footprint_daemon_pss_kb"`
	LoadAverage   float64  `json:"load_average"`
	DaemonProgram string   `json:"footprint_daemon_program"`
}

// footprintRound is one round's sums.
type footprintRound struct {
	directPSS, directRSS, sessPSS, sessRSS, shimPSS, shimRSS, shimAnon, daemonPSS int64
	// base is sessPSS − directPSS at the base number of sessions.
	base    int64
	program string
}

// runFootprintBench measures n sessions against n direct agents, rounds
// times, and prints the result.
func runFootprintBench(ctx context.Context, o benchBootOptions, n, rounds int, asJSON bool, out, progress io.Writer) error {
	bin := o.binary
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		bin = self
	}
	o.binary = bin
	spec, err := demoAgentOf(bin)
	if err != nil {
		return err
	}
	n0 := max(1, n/4)
	var all []footprintRound
	for r := range rounds {
		var base, fr footprintRound
		for _, m := range []struct {
			n  int
			fr *footprintRound
		}{{n0, &base}, {n, &fr}} {
			fmt.Fprintf(progress, "round %d: %d demo agents started directly, then %d demo sessions…\n", r+1, m.n, m.n)
			if m.fr.directPSS, m.fr.directRSS, err = directFootprint(spec, m.n); err != nil {
				return err
			}
			if err := sessionsFootprint(ctx, o, m.n, m.fr); err != nil {
				return err
			}
		}
		fr.base = base.sessPSS - base.directPSS
		all = append(all, fr)
	}
	res := footprintResult{Sessions: n, BaseSessions: n0, Rounds: rounds, ShimProgram: all[0].program, DaemonProgram: bin, LoadAverage: loadAverage()}
	pick := func(f func(footprintRound) int64) [3]int64 {
		var xs []int64
		for _, fr := range all {
			xs = append(xs, f(fr))
		}
		return spread(xs)
	}
	res.DirectPSSKB = pick(func(f footprintRound) int64 { return f.directPSS })
	res.DirectRSSKB = pick(func(f footprintRound) int64 { return f.directRSS })
	res.SessionsPSSKB = pick(func(f footprintRound) int64 { return f.sessPSS })
	res.SessionsRSSKB = pick(func(f footprintRound) int64 { return f.sessRSS })
	res.OwnPSSPerSessionKB = pick(func(f footprintRound) int64 { return (f.sessPSS - f.directPSS) / int64(n) })
	res.OwnRSSPerSessionKB = pick(func(f footprintRound) int64 { return (f.sessRSS - f.directRSS) / int64(n) })
	res.OwnMarginalPSSPerSessionKB = pick(func(f footprintRound) int64 { return (f.sessPSS - f.directPSS - f.base) / int64(n-n0) })
	res.ShimPSSKB = pick(func(f footprintRound) int64 { return f.shimPSS })
	res.ShimRSSKB = pick(func(f footprintRound) int64 { return f.shimRSS })
	res.ShimAnonKB = pick(func(f footprintRound) int64 { return f.shimAnon })
	res.DaemonPSSKB = pick(func(f footprintRound) int64 { return f.daemonPSS })
	if asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	printFootprint(out, res)
	return nil
}

// printFootprint writes res as a table.
func printFootprint(out io.Writer, res footprintResult) {
	fmt.Fprintf(out, "footprint: %d idle demo sessions (shims run %s) against %d demo agents started directly, %d rounds (median [min–max] KiB)\n",
		res.Sessions, res.ShimProgram, res.Sessions, res.Rounds)
	row := func(name string, v [3]int64) { fmt.Fprintf(out, "  %-34s %8d  [%d–%d]\n", name, v[1], v[0], v[2]) }
	row("berth's own PSS per session", res.OwnPSSPerSessionKB)
	row(fmt.Sprintf("… each session past %d", res.BaseSessions), res.OwnMarginalPSSPerSessionKB)
	row("berth's own RSS per session", res.OwnRSSPerSessionKB)
	row("all processes of the sessions, PSS", res.SessionsPSSKB)
	row("the agents started directly, PSS", res.DirectPSSKB)
	row("one shim's PSS", res.ShimPSSKB)
	row("one shim's RSS", res.ShimRSSKB)
	row("one shim's anonymous memory", res.ShimAnonKB)
	row("the daemon's PSS", res.DaemonPSSKB)
	fmt.Fprintf(out, "  load average %.2f\n", res.LoadAverage)
}

// spread is the smallest, the median and the largest of xs.
func spread(xs []int64) [3]int64 {
	if len(xs) == 0 {
		return [3]int64{}
	}
	return [3]int64{slices.Min(xs), median(xs), slices.Max(xs)}
}

// demoAgentOf is the demo agent as a daemon running bin starts it.
func demoAgentOf(bin string) (berth.AgentSpec, error) {
	catalog, err := config.Default().Catalog(bin)
	if err != nil {
		return berth.AgentSpec{}, err
	}
	spec, ok := catalog.Get("demo")
	if !ok {
		return spec, berth.Errorf(berth.ENotFound, "no demo agent")
	}
	return spec, nil
}

// directFootprint starts n agents of spec directly, each through its ACP
// handshake, sums the memory of their process trees, and ends them.
func directFootprint(spec berth.AgentSpec, n int) (pss, rss int64, _ error) {
	root, err := os.MkdirTemp("", "berth-bench-direct-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(root)
	agents := &directAgents{}
	defer agents.close()
	var pids []int
	for range n {
		a, _, err := startDirect(spec, root, berth.SandboxHost)
		if err != nil {
			return 0, 0, err
		}
		agents.agents = append(agents.agents, a)
		pids = append(pids, a.cmd.Process.Pid)
	}
	pss, rss = sumMemory(processTree(pids))
	return pss, rss, nil
}

// sessionsFootprint starts a daemon running o.binary, creates n demo
// sessions and sums the memory of every process of theirs: the daemon,
// its shims (spare included) and all they started.
func sessionsFootprint(ctx context.Context, o benchBootOptions, n int, fr *footprintRound) error {
	home, err := os.MkdirTemp("", "berth-bench-fp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	if err := writeBenchConfig(home, n+1, true); err != nil {
		return err
	}
	d, err := serveHealthy(ctx, o, home)
	if err != nil {
		return err
	}
	defer func() { _ = d.stop(time.Minute) }()
	if err := createMany(ctx, d.c, o.sandbox, n); err != nil {
		return d.failed("create", err)
	}
	runDir := filepath.Join(home, "run")
	shims := settledShims(runDir, n+1)
	fr.sessPSS, fr.sessRSS = sumMemory(append([]int{d.cmd.Process.Pid}, processTree(shims)...))
	if m, err := smapsRollup(d.cmd.Process.Pid); err == nil {
		fr.daemonPSS = m["Pss"]
	}
	var pss, rss, anon []int64
	serving := ShimPIDs(runDir)
	for _, pid := range serving {
		if m, err := smapsRollup(pid); err == nil {
			pss, rss, anon = append(pss, m["Pss"]), append(rss, m["Rss"]), append(anon, m["Anonymous"])
		}
	}
	fr.shimPSS, fr.shimRSS, fr.shimAnon = median(pss), median(rss), median(anon)
	fr.program = "berth shim"
	if len(serving) > 0 {
		fr.program = shimProgram(serving[0])
	}
	return nil
}

// settledShims returns the shims of runDir once there are want of them
// (a shim per session and the spare the daemon starts again shortly after
// it gave its last one away), or what there are after 5 s: a round that
// weighed the spare in one half and not in the other would be off by a
// shim.
func settledShims(runDir string, want int) []int {
	deadline := time.Now().Add(5 * time.Second)
	for {
		shims := runShims(runDir)
		if len(shims) >= want || time.Now().After(deadline) {
			return shims
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sumMemory adds up the PSS and the RSS of pids, in KiB.
func sumMemory(pids []int) (pss, rss int64) {
	for _, pid := range pids {
		if m, err := smapsRollup(pid); err == nil {
			pss, rss = pss+m["Pss"], rss+m["Rss"]
		}
	}
	return pss, rss
}
