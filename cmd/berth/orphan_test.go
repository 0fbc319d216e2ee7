package main

import (
	"os"
	"testing"
	"time"
)

// waitGone polls until none of pids is a live process.
func waitGone(t *testing.T, what string, pids []int) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: processes %v still run", what, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// liveProcsOf returns a live session's agent and its shim (not the spare
// shim, which rightly exits with its daemon), after checking there are
// some.
func liveProcsOf(t *testing.T, home, id string) []int {
	t.Helper()
	agents := agentPIDs(id)
	var shims []int
	for pid, sid := range shimSessions(home) {
		if sid == id {
			shims = append(shims, pid)
		}
	}
	if len(agents) == 0 || len(shims) == 0 {
		t.Fatalf("the session has %d agent and %d shim processes", len(agents), len(shims))
	}
	return append(agents, shims...)
}

// A shim whose daemon died and never came back stops its agent and exits
// after [limits] orphan_timeout.
func TestAnOrphanedShimEndsAfterTheOrphanTimeout(t *testing.T) {
	home := t.TempDir()
	s := startServerEnv(t, home, []string{"BERTH_LIMITS_ORPHAN_TIMEOUT=2s"})
	sess := s.busySession(t, nil)
	pids := liveProcsOf(t, home, sess.ID)
	s.kill9()
	// The control: the agent outlives its daemon for a while.
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d died with the daemon", pid)
		}
	}
	waitGone(t, "after the orphan timeout", pids)
}

// A shim whose home was deleted after its daemon died stops its agent and
// exits: nothing can ever reattach it.
func TestAShimWhoseHomeIsDeletedEnds(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySession(t, nil)
	pids := liveProcsOf(t, home, sess.ID)
	s.kill9()
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "after the home was deleted", pids)
}
