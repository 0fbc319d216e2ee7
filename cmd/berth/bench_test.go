package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-sh/berth/bench"
)

// A short soak on a real daemon passes, and its measure sees the
// processes a live session holds.
func TestSoakRunsCleanAndCountsLiveProcesses(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySession(t, nil)
	if n := len(bench.HomeProcesses(home)); n < 1 {
		t.Fatalf("homeProcesses counts %d processes for a home with a live session %s", n, sess.ID)
	}
	cmd := exec.Command(bin, "bench", "--soak", "40", "--soak-in-flight", "8")
	cmd.Env = cleanEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "soak: after") {
		t.Fatalf("soak printed no figures:\n%s", out)
	}
}
