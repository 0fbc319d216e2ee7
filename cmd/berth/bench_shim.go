package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	bhttp "github.com/berth-sh/berth/http"
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
}

// benchNoShimFirstEvents measures prompt → first agent event on a daemon
// whose agents are its own children, the baseline of what shims cost.
func benchNoShimFirstEvents(ctx context.Context, cfg *config.Config, sandbox string, sessions, prompts int) ([]time.Duration, error) {
	home, err := os.MkdirTemp("", "berth-bench-noshim-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	d, err := openDaemon(ctx, daemonOptions{home: home, cfg: cfg, addr: "127.0.0.1:0",
		logger: quietLogger().With("daemon", "bench-noshim"), noShims: true})
	if err != nil {
		return nil, err
	}
	defer closeBenchDaemon(ctx, d)
	d.startServing()
	c := bhttp.NewClient(d.srv.Addr(), d.token)
	defer c.Close()
	var agent []time.Duration
	for range sessions {
		s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: sandbox})
		if err != nil {
			return nil, err
		}
		_, a, err := benchPrompts(ctx, c, s.ID, prompts)
		if err != nil {
			return nil, err
		}
		agent = append(agent, a...)
	}
	return agent, nil
}

// closeBenchDaemon closes a bench daemon, stopping (or leaving) a
// thousand sessions within a bound of its own.
func closeBenchDaemon(ctx context.Context, d *daemon) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	d.close(cctx)
}

// measureShims reads the memory of the shims serving sessions in runDir.
func measureShims(runDir string, res *shimResult) {
	var rss, pss, priv []int64
	for _, pid := range shimPIDs(runDir) {
		m, err := smapsRollup(pid)
		if err != nil {
			continue
		}
		rss, pss, priv = append(rss, m["Rss"]), append(pss, m["Pss"]), append(priv, m["Private_Clean"]+m["Private_Dirty"])
	}
	res.ShimRSSP50KB, res.ShimPSSP50KB, res.ShimPrivateP50KB = median(rss), median(pss), median(priv)
	res.ShimPrivateMaxKB = maxOf(priv)
}

// shimPIDs returns the pids of the shims serving sessions in runDir
// (those with a pid file; idle spares have none).
func shimPIDs(runDir string) []int {
	var out []int
	pidFiles, _ := filepath.Glob(filepath.Join(runDir, "*.pid"))
	for _, f := range pidFiles {
		if pid := shim.ReadPID(f, runDir); pid > 0 {
			out = append(out, pid)
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
