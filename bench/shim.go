package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/internal/procfs"
	"github.com/berth-sh/berth/shim"
)

// shimResult is what bench measures of shims: their memory, what the spool
// costs a turn's first agent event, and a boot that reattaches many.
type shimResult struct {
	// AgentEvent* are prompt → first agent_message, with shims and with
	// the agents as the daemon's own children.
	AgentEventP50Ms       float64 `json:"prompt_first_agent_event_p50_ms,omitempty"`
	AgentEventP99Ms       float64 `json:"prompt_first_agent_event_p99_ms,omitempty"`
	AgentEventNoShimP50Ms float64 `json:"prompt_first_agent_event_no_shim_p50_ms,omitempty"`
	AgentEventNoShimP99Ms float64 `json:"prompt_first_agent_event_no_shim_p99_ms,omitempty"`
	// Shim memory in KiB over the reattach bench's shims: resident, its
	// proportional share (shared pages of the binary divided among the
	// processes mapping them) and private (the shim's own).
	ShimRSSP50KB     int64 `json:"shim_rss_p50_kb,omitempty"`
	ShimPSSP50KB     int64 `json:"shim_pss_p50_kb,omitempty"`
	ShimPrivateP50KB int64 `json:"shim_private_p50_kb,omitempty"`
	ShimPrivateMaxKB int64 `json:"shim_private_max_kb,omitempty"`
	// ShimProgram is what the measured shims run: "berth-shim" (the small
	// one berth carries), "berth shim-local" (a berth without it) or
	// "berth shim".
	ShimProgram string `json:"shim_program,omitempty"`
	// Total* are every process of berth's with the reattach bench's
	// sessions live — the daemon (this bench process, which also holds
	// the bench's first daemon: an overstatement), its shims, spare
	// included, and all they started (agents, bwrap) — divided by the
	// sessions, in KiB. PSS adds up to what the machine pays; RSS counts
	// shared pages once in every process.
	TotalPSSPerSessionKB int64 `json:"total_pss_per_session_kb,omitempty"`
	TotalRSSPerSessionKB int64 `json:"total_rss_per_session_kb,omitempty"`
	DaemonPSSKB          int64 `json:"daemon_pss_kb,omitempty"`
	// OwnPSSPerSessionKB is the daemon and the shims alone, per session:
	// what berth adds to the agents.
	OwnPSSPerSessionKB int64 `json:"own_pss_per_session_kb,omitempty"`
}

// shimPrefix starts the file name of the small shims berth installs in a
// home (cmd/berth's shimbin.go).
const shimPrefix = "berth-shim-"

// shimProgram names what shim pid runs: "berth-shim", "berth shim-local"
// or "berth shim".
func shimProgram(pid int) string {
	if exe, _ := procfs.Exe(pid); strings.HasPrefix(filepath.Base(exe), shimPrefix) {
		return "berth-shim"
	}
	if args, err := procfs.Cmdline(pid); err == nil && len(args) > 1 && args[1] == "shim-local" {
		return "berth shim-local"
	}
	return "berth shim"
}

// closeBenchDaemon closes a bench daemon, stopping (or leaving) a
// thousand sessions within a bound of its own.
func closeBenchDaemon(ctx context.Context, d *daemon.Daemon) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	d.Close(cctx)
}

// measureShims reads the memory of the shims serving sessions in runDir.
func measureShims(runDir string, res *shimResult) {
	var rss, pss, priv []int64
	for _, pid := range ShimPIDs(runDir) {
		m, err := smapsRollup(pid)
		if err != nil {
			continue
		}
		rss, pss, priv = append(rss, m["Rss"]), append(pss, m["Pss"]), append(priv, m["Private_Clean"]+m["Private_Dirty"])
	}
	res.ShimRSSP50KB, res.ShimPSSP50KB, res.ShimPrivateP50KB = median(rss), median(pss), median(priv)
	res.ShimPrivateMaxKB = maxOf(priv)
}

// measureTotals reads which program the shims of home run, and every
// process of berth's with n sessions live — the daemon (pid daemon), its
// shims, spare included, and all they started (agents, bwrap) — per
// session.
func measureTotals(home string, daemonPID, n int, res *shimResult) {
	runDir := filepath.Join(home, "run")
	if pids := ShimPIDs(runDir); len(pids) > 0 {
		res.ShimProgram = shimProgram(pids[0])
	}
	var totPSS, totRSS, ownPSS int64
	shims := runShims(runDir)
	for i, pid := range append([]int{daemonPID}, processTree(shims)...) {
		if m, err := smapsRollup(pid); err == nil {
			totPSS, totRSS = totPSS+m["Pss"], totRSS+m["Rss"]
			// The daemon, then the shims, then what they started.
			if i <= len(shims) {
				ownPSS += m["Pss"]
			}
			if i == 0 {
				res.DaemonPSSKB = m["Pss"]
			}
		}
	}
	res.TotalPSSPerSessionKB, res.TotalRSSPerSessionKB = totPSS/int64(n), totRSS/int64(n)
	res.OwnPSSPerSessionKB = ownPSS / int64(n)
}

// ShimPIDs returns the pids of the shims serving sessions in runDir
// (those with a pid file; idle spares have none).
func ShimPIDs(runDir string) []int {
	var out []int
	pidFiles, _ := filepath.Glob(filepath.Join(runDir, "*.pid"))
	for _, f := range pidFiles {
		if pid := shim.ReadPID(f, runDir); pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// runShims returns the shims of runDir, spares included, found by the
// run directory in their environment.
func runShims(runDir string) []int {
	return procfs.WithEnv(shim.EnvRun + "=" + runDir)
}

// processTree returns roots and every process descended from them (each
// thread of a process lists the children it forked).
func processTree(roots []int) []int {
	out := slices.Clone(roots)
	for i := 0; i < len(out); i++ {
		files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(c); err == nil {
					out = append(out, pid)
				}
			}
		}
	}
	return out
}

// smapsRollup reads a process's memory totals in KiB.
func smapsRollup(pid int) (map[string]int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) > 0 {
			n, _ := strconv.ParseInt(fields[0], 10, 64)
			out[k] = n
		}
	}
	return out, sc.Err()
}

// median is the middle value (0 for none).
func median(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// maxOf is the largest value (0 for none).
func maxOf(xs []int64) int64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}
