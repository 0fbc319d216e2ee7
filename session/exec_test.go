package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/session/live"

	"github.com/berth-sh/berth"
)

func TestExecRunsInTheWorkspaceAndIsLogged(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if err := os.MkdirAll(filepath.Join(s.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := e.m.Exec(ctx, s.ID, berth.ExecRequest{Command: []string{"sh", "-c", "pwd; echo oops >&2; echo $GREETING; exit 4"},
		Cwd: "sub", Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 4 || res.TimedOut || res.Stdout != filepath.Join(s.Workspace, "sub")+"\nhi\n" || res.Stderr != "oops\n" {
		t.Fatalf("exec: %+v", res)
	}
	evs := ofType(e.events(s.ID), berth.EventExec)
	if len(evs) != 1 {
		t.Fatalf("%d exec events", len(evs))
	}
	var d live.ExecData
	_ = json.Unmarshal(evs[0].Data, &d)
	if d.ExitCode != 4 || !strings.HasPrefix(d.Command, "sh -c pwd") {
		t.Fatalf("exec event: %s", evs[0].Data)
	}
	for _, bad := range []berth.ExecRequest{{}, {Command: []string{"true"}, Cwd: "../.."}, {Command: []string{"true"}, TimeoutSeconds: -1}} {
		if _, err := e.m.Exec(ctx, s.ID, bad); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("exec %+v = %v, want invalid_argument", bad, err)
		}
	}
	if _, err := e.m.Exec(ctx, s.ID, berth.ExecRequest{Command: []string{"/no/such/program"}}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("a missing program = %v", err)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Exec(ctx, s.ID, berth.ExecRequest{Command: []string{"true"}}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("exec on a stopped session = %v", err)
	}
}

func TestExecTimeoutKillsTheWholeGroup(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	marker := "berth-exec-timeout-" + s.ID
	// The command would run for 1000 s: only the 1 s timeout ends it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := e.m.Exec(ctx, s.ID, berth.ExecRequest{
		Command: []string{"sh", "-c", "sleep 1000 & sleep 1000"}, Env: map[string]string{"MARK": marker}, TimeoutSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Fatalf("exec: %+v", res)
	}
	waitFor(t, "no process of the exec to remain", func() bool { return len(processesWith(marker)) == 0 })
}

// processesWith lists live processes whose environment contains s.
func processesWith(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, ent := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ"))
		if err == nil && strings.Contains(string(b), s) && !isZombieName(ent.Name()) {
			var pid int
			for _, c := range ent.Name() {
				pid = pid*10 + int(c-'0')
			}
			out = append(out, pid)
		}
	}
	return out
}

// isZombieName reports whether /proc/<name> is a zombie.
func isZombieName(name string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", name, "stat"))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && strings.HasPrefix(string(b[i+1:]), " Z")
}

func TestNothingOfASessionOutlivesItsStop(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{})
	// A process that leaves the agent's process group still carries the
	// session's id in its environment.
	if _, err := e.m.Exec(context.Background(), s.ID, berth.ExecRequest{Command: []string{"sh", "-c", "(setsid sleep 1000 &); echo ok"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the escaped sleep to run", func() bool { return len(sessionProcesses()[s.ID]) > 1 })
	if _, err := e.m.StopSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no process of the session to remain", func() bool {
		for _, pid := range sessionProcesses()[s.ID] {
			if !isZombieName(strconv.Itoa(pid)) {
				return false
			}
		}
		return true
	})
}
