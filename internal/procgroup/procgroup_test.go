package procgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procfs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run runs a shell script to completion and returns its process state.
func run(t *testing.T, script string) *os.ProcessState {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	_ = cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("%q did not run", script)
	}
	return cmd.ProcessState
}

func TestExitStatusOf(t *testing.T) {
	cases := []struct {
		script string
		want   berth.ExitStatus
	}{
		{"exit 0", berth.ExitStatus{}},
		{"exit 4", berth.ExitStatus{Code: 4}},
		{"kill -TERM $$", berth.ExitStatus{Code: 143, Signal: "SIGTERM"}},
		{"kill -KILL $$", berth.ExitStatus{Code: 137, Signal: "SIGKILL"}},
	}
	for _, tc := range cases {
		if got := ExitStatusOf(run(t, tc.script)); got != tc.want {
			t.Errorf("%q: %+v, want %+v", tc.script, got, tc.want)
		}
	}
	if got := ExitStatusOf(nil); got.Code != -1 || got.Success() {
		t.Errorf("nil state: %+v", got)
	}
}

func TestSignalName(t *testing.T) {
	cases := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP", 0: "SIG0"}
	for sig, want := range cases {
		if got := SignalName(sig); got != want {
			t.Errorf("SignalName(%d) = %q, want %q", int(sig), got, want)
		}
	}
}

func TestSignalRefusesSpecialGroups(t *testing.T) {
	for _, pgid := range []int{-3, 0, 1} {
		if err := Signal(pgid, 0); err == nil {
			t.Errorf("Signal(%d) succeeded", pgid)
		}
		if Alive(pgid) {
			t.Errorf("Alive(%d) = true", pgid)
		}
	}
}

// startGroup starts script in its own group; done closes once it is reaped.
func startGroup(t *testing.T, script string) (cmd *exec.Cmd, stdout *bufio.Reader, done chan struct{}) {
	t.Helper()
	cmd = exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() {
		// Drain stdout before Wait closes it.
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = Signal(cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd, bufio.NewReader(out), done
}

func TestTerminateEscalates(t *testing.T) {
	cmd := exec.Command("sh", "-c", `trap "" TERM; echo ready; sleep 100`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	if pgid, err := syscall.Getpgid(cmd.Process.Pid); err != nil || pgid != cmd.Process.Pid {
		t.Fatalf("pgid = %d, %v; want the pid %d", pgid, err, cmd.Process.Pid)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("got %q, %v", line, err)
	}
	done := make(chan struct{})
	var state *os.ProcessState
	go func() {
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		state = cmd.ProcessState
		close(done)
	}()
	const grace = 100 * time.Millisecond
	t0 := time.Now()
	if err := Terminate(context.Background(), cmd.Process.Pid, grace, done); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < grace {
		t.Errorf("SIGKILL after %v, before the grace", took)
	}
	<-done
	if st := ExitStatusOf(state); st.Signal != "SIGKILL" {
		t.Errorf("status %+v, want SIGKILL", st)
	}
}

func TestTerminatePolite(t *testing.T) {
	// The shell execs: a shell that forks blocks every signal around the
	// fork, and a SIGTERM to the group then reaches the shell (pending)
	// but not the child it forks, which lives on holding stdout.
	cmd, _, done := startGroup(t, "exec sleep 100")
	pid := cmd.Process.Pid
	// Should it not die, what it was doing then says why.
	stuck := make(chan string, 1)
	watch := time.AfterFunc(20*time.Second, func() { stuck <- signalStatus(pid) })
	t0 := time.Now()
	err := Terminate(context.Background(), pid, time.Minute, done)
	if !watch.Stop() {
		t.Errorf("the process had not obeyed SIGTERM after 20s: %s", <-stuck)
	}
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took > 30*time.Second {
		t.Errorf("Terminate waited %v for a process that obeys SIGTERM", took)
	}
	<-done
	if st := ExitStatusOf(cmd.ProcessState); st.Signal != "SIGTERM" {
		t.Errorf("status %+v, want SIGTERM", st)
	}
	// Terminating an empty group is not an error.
	if err := Terminate(context.Background(), cmd.Process.Pid, 0, done); err != nil {
		t.Errorf("Terminate of an empty group = %v", err)
	}
}

// signalStatus describes pid's state and what it does with SIGTERM, read
// from /proc/<pid>/status: "state S", plus "SIGTERM blocked", "ignored" or
// "pending" where it applies.
func signalStatus(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	term := uint64(1) << (uint(syscall.SIGTERM) - 1)
	out := []string{}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, _ := strings.Cut(line, ":\t")
		val = strings.TrimSpace(val)
		if key == "State" {
			out = append(out, "state "+val)
			continue
		}
		what := map[string]string{"SigBlk": "blocked", "SigIgn": "ignored", "SigPnd": "pending", "ShdPnd": "pending"}[key]
		if mask, err := strconv.ParseUint(val, 16, 64); what != "" && err == nil && mask&term != 0 {
			out = append(out, "SIGTERM "+what)
		}
	}
	return strings.Join(out, ", ")
}

func TestStartProcPipes(t *testing.T) {
	p, err := StartProc(exec.Command("sh", "-c", "cat; echo bye >&2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(p.Stdin(), "hi\n"); err != nil {
		t.Fatal(err)
	}
	_ = p.Stdin().Close()
	out, err := io.ReadAll(p.Stdout())
	if err != nil || string(out) != "hi\n" {
		t.Errorf("stdout %q, %v", out, err)
	}
	errOut, err := io.ReadAll(p.Stderr())
	if err != nil || string(errOut) != "bye\n" {
		t.Errorf("stderr %q, %v", errOut, err)
	}
	// Drained readers closed themselves and keep answering EOF.
	if n, err := p.Stdout().Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("read after EOF = %d, %v", n, err)
	}
	if err := p.Stdout().Close(); err != nil {
		t.Errorf("Close after EOF = %v", err)
	}
	st, err := p.Wait()
	if err != nil || !st.Success() {
		t.Errorf("Wait = %+v, %v", st, err)
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done not closed after Wait")
	}
	if err := p.Signal(os.Interrupt); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after exit = %v, want os.ErrProcessDone", err)
	}
}

func TestStartProcFailure(t *testing.T) {
	cmd := exec.Command("/nonexistent/berth-test-binary")
	if _, err := StartProc(cmd); err == nil {
		t.Fatal("started a missing binary")
	}
}

// A Stop whose context is already over still kills the group, whichever
// way its first select goes.
func TestStopWithADoneContextStillKills(t *testing.T) {
	for range 20 {
		cmd := exec.Command("sh", "-c", "trap '' TERM; sleep 100")
		p, err := StartProc(cmd)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = p.Stop(ctx, time.Hour)
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a Stop with a done context left the process running")
		}
	}
}

// Stop returns once nothing of the group runs, not only its leader: a
// child the leader left behind (reparented when the leader died) is dead
// too by then (a zombie at most, until its new parent reaps it).
func TestStopReturnsOnceTheGroupIsGone(t *testing.T) {
	for range 10 {
		p, err := StartProc(exec.Command("sh", "-c", "trap '' TERM; sleep 100 & sleep 100 & wait"))
		if err != nil {
			t.Fatal(err)
		}
		// Both children are up before the stop.
		deadline := time.Now().Add(10 * time.Second)
		for groupSize(p.Pid(), true) < 3 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if _, err := p.Stop(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if n := groupSize(p.Pid(), false); n != 0 {
			t.Fatalf("the group %d still has %d running processes after Stop", p.Pid(), n)
		}
	}
}

// groupSize counts the processes of process group pgid, zombies too when
// zombies is set.
func groupSize(pgid int, zombies bool) int {
	n := 0
	for _, st := range procfs.Group(pgid) {
		if zombies || st.Live() {
			n++
		}
	}
	return n
}
