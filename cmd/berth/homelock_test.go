package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// A second daemon on the home of a running one exits 1 naming the holder,
// before it touches the store, the shims or an agent: the first daemon's
// live session keeps its agent and its log gains nothing.
func TestASecondDaemonOnAHomeLeavesTheFirstAlone(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, nil, "echo ready")
	before := s.waitLog(t, sess.ID, "the turn ends", func(evs []berth.Event) bool {
		_, ok := turnEndedOf(evs, sess.CurrentTurnID)
		return ok
	})
	agents := agentPIDs(sess.ID)
	if len(agents) == 0 {
		t.Fatal("no agent process carries the session's id")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, bin, "serve", "--home", home, "--addr", freeAddr(t))
	second.Env = cleanEnv(home)
	out, err := second.CombinedOutput()
	if code := second.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("second daemon exited %d (%v), want 1:\n%s", code, err, out)
	}
	for _, want := range []string{"pid " + strconv.Itoa(s.cmd.Process.Pid), s.addr} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not name %q:\n%s", want, out)
		}
	}

	for _, pid := range agents {
		if !alive(pid) {
			t.Errorf("agent %d of the first daemon's session died", pid)
		}
	}
	after := s.allEvents(t, sess.ID)
	if len(after) != len(before) {
		t.Errorf("the first daemon's session log went from %d to %d events: %v", len(before), len(after), after[len(before):])
	}
	var got berth.Session
	if st, _ := s.api("GET", "/v1/sessions/"+sess.ID, nil, &got); st != 200 || got.State != berth.StateActive {
		t.Errorf("session after the refused start: %d %s", st, got.State)
	}
	// The first daemon still serves: a new turn runs.
	var r berth.TurnResult
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/prompts?wait=true", map[string]string{"text": "echo still here"}, &r); st != 200 || r.StopReason != "end_turn" {
		t.Errorf("prompt after the refused start: %d %+v", st, r)
	}
}

// No shim or agent keeps the daemon's working directory: shims work in the
// run directory, agents in their workspace.
func TestShimsAndAgentsLeaveTheDaemonsWorkingDirectory(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.busySessionWith(t, nil, "sleep 60000")
	daemonCwd, err := os.Readlink("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/cwd")
	if err != nil {
		t.Fatal(err)
	}
	pids := append(agentPIDs(sess.ID), shimsOf(home)...)
	if len(pids) < 2 {
		t.Fatalf("found %d processes of the session (want its shim and agent)", len(pids))
	}
	for _, pid := range pids {
		cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
		if err != nil {
			continue // exited meanwhile
		}
		if cwd == daemonCwd {
			t.Errorf("process %d works in the daemon's directory %s", pid, cwd)
		}
	}
}
