package main

import (
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/procfs"
)

// idleWindow is how long TestAnIdleSessionsShimSleeps watches a shim, and
// idleShimSwitches the context switches it allows the shim in that time.
// Measured on a loaded 2-core machine: with the 2 s run directory poll a
// shim once ran with its daemon attached, 43 in 20 s (15 to 90 in 10 s
// elsewhere: every thread counts, the runtime's monitor around each
// poll); with no timer armed, 0 (at most 3 in any 10 s of 160 s: a spool
// ack, the runtime's minute). Load does not make a waking shim wake less:
// these are the times it asked to run, not the times it was refused.
const (
	idleWindow       = 20 * time.Second
	idleShimSwitches = 10
)

// An idle session's shim sleeps: with its daemon attached and nothing
// happening, it arms no timer and nothing wakes it (docs/api.md, Agents
// outlive the daemon), so that a thousand idle sessions cost nothing.
func TestAnIdleSessionsShimSleeps(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.create(t, nil)
	s.turn(t, sess.ID, "echo idle")
	shim := 0
	for pid, id := range shimSessions(home) {
		if id == sess.ID {
			shim = pid
		}
	}
	if shim == 0 {
		t.Fatal("the session has no shim")
	}
	// The turn's aftermath first: its output acked to the shim (the
	// supervisor acks every 10 s). Nothing is awaited: this is time.
	time.Sleep(11 * time.Second)
	last, err := procfs.ContextSwitches(shim)
	if err != nil {
		t.Fatalf("the shim: %v", err)
	}
	// The window: nothing is awaited, only counted.
	time.Sleep(idleWindow)
	n, err := procfs.ContextSwitches(shim)
	if err != nil {
		t.Fatalf("the shim: %v", err)
	}
	woke := n - last
	t.Logf("an idle shim was switched %d times in %s", woke, idleWindow)
	if woke > idleShimSwitches {
		t.Errorf("an idle shim was switched %d times in %s, want at most %d: something wakes it", woke, idleWindow, idleShimSwitches)
	}
}

// `berth bench --idle N` measures every group it names: the daemon, its
// shims (the spare too), the agents under them and N agents started
// directly, over the window asked for.
func TestBenchIdleReportsEveryGroup(t *testing.T) {
	var r struct {
		Sessions    int     `json:"idle_sessions"`
		Seconds     float64 `json:"idle_seconds"`
		Shims       int     `json:"idle_shims"`
		AgentProcs  int     `json:"idle_agent_procs"`
		DirectProcs int     `json:"idle_direct_procs"`
		DaemonPct   float64 `json:"idle_daemon_core_pct"`
		BerthPct    float64 `json:"idle_berth_core_pct"`
	}
	benchReport(t, &r, "--idle", "3", "--idle-seconds", "2s", "--sandbox", "host")
	if r.Sessions != 3 || r.Seconds < 2 || r.Shims < 3 || r.AgentProcs != 3 || r.DirectProcs != 3 ||
		// The daemon's supervisor ticks every second: 2 s cost it something.
		r.DaemonPct <= 0 || r.BerthPct < r.DaemonPct {
		t.Fatalf("idle report = %+v", r)
	}
}
