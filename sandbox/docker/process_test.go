package docker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/procgroup"
)

// drain reads r to its end.
func drain(r io.Reader) { _, _ = io.Copy(io.Discard, r) }

func TestExitCodeAndStdout(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	res := run(t, sb, nil, "sh", "-c", "echo hi; echo oops >&2; exit 3")
	if res.stdout != "hi\n" || res.stderr != "oops\n" || res.status != (berth.ExitStatus{Code: 3}) {
		t.Fatalf("%+v", res)
	}
	// The engine reports deaths by signal as 128+n only: a code in that
	// range reads as the signal, as a shell would report it.
	if res := run(t, sb, nil, "sh", "-c", "kill -KILL $$"); res.status != (berth.ExitStatus{Code: 137, Signal: "SIGKILL"}) {
		t.Errorf("kill -KILL $$: %+v", res.status)
	}
	if res := run(t, sb, nil, "sh", "-c", "exit 255"); res.status != (berth.ExitStatus{Code: 255}) {
		t.Errorf("exit 255: %+v", res.status)
	}
}

func TestStdinRoundTrip(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	proc, err := sb.Start(t.Context(), berth.ProcSpec{Path: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	if proc.Pid() <= 1 {
		t.Errorf("Pid = %d", proc.Pid())
	}
	go drain(proc.Stderr())
	out := bufio.NewReader(proc.Stdout())
	for _, msg := range []string{"ping\n", strings.Repeat("x", 100000) + "\n", "pong\n"} {
		if _, err := proc.Stdin().Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got, err := out.ReadString('\n')
		if err != nil || got != msg {
			t.Fatalf("echo of %d bytes: got %d bytes, %v", len(msg), len(got), err)
		}
	}
	if err := proc.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(out); len(rest) != 0 {
		t.Errorf("after stdin closed: %q", rest)
	}
	st, err := proc.Wait()
	if err != nil || !st.Success() {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	if err := proc.Stdin().Close(); err != nil {
		t.Errorf("second stdin Close: %v", err)
	}
}

func TestCallerStreams(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	var out, errb bytes.Buffer
	proc, err := sb.Start(t.Context(), berth.ProcSpec{Path: "sh", Args: []string{"-c", "cat; echo e >&2"},
		Stdin: strings.NewReader("given\n"), Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if proc.Stdin() != nil || proc.Stdout() != nil || proc.Stderr() != nil {
		t.Error("pipes returned for caller-supplied streams")
	}
	st, err := proc.Wait()
	if err != nil || !st.Success() || out.String() != "given\n" || errb.String() != "e\n" {
		t.Fatalf("Wait = %+v, %v; stdout %q stderr %q", st, err, out.String(), errb.String())
	}
}

func TestStartFailure(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	for path, want := range map[string]string{
		"no-such-program": "executable file not found",
		"/etc/passwd":     "permission denied",
	} {
		_, err := sb.Start(t.Context(), berth.ProcSpec{Path: path})
		if !berth.IsCode(err, berth.EUnavailable) || !strings.Contains(berth.ErrorMessage(err), want) {
			t.Errorf("Start %s = %v, want unavailable with %q", path, err, want)
		}
	}
	// The sandbox still works.
	if res := run(t, sb, nil, "true"); !res.status.Success() {
		t.Errorf("true: %+v", res)
	}
}

func TestStopTermAndKill(t *testing.T) {
	for _, viaExec := range []bool{false, true} {
		name := "kill(2)"
		if viaExec {
			name = "exec"
		}
		t.Run(name, func(t *testing.T) {
			p := newProvider(t, Options{})
			sb := openSandbox(t, p, berth.SandboxConfig{})
			ctx := t.Context()
			start := func(script string) *Process {
				t.Helper()
				proc, err := sb.Start(ctx, berth.ProcSpec{Path: "sh", Args: []string{"-c", script}})
				if err != nil {
					t.Fatal(err)
				}
				pr := proc.(*Process)
				pr.forceExecSignal = viaExec
				if viaExec && pr.nspid <= 1 {
					t.Fatalf("no pid inside the container for host pid %d", pr.pid)
				}
				go drain(pr.Stderr())
				// The script says when its trap and child are in place.
				out := bufio.NewReader(pr.Stdout())
				if line, err := out.ReadString('\n'); line != "ready\n" {
					t.Fatalf("got %q, %v", line, err)
				}
				go drain(out)
				return pr
			}

			// A process that honours SIGTERM, with a child in its group. The
			// grace outlasts the test's context: Stop must return because the
			// process ended, not because the grace ran out.
			polite := start("sleep 1000 & echo ready; exec sleep 1001")
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			st, err := polite.Stop(sctx, time.Hour)
			if err != nil || st != (berth.ExitStatus{Code: 143, Signal: "SIGTERM"}) {
				t.Fatalf("Stop of a polite process = %+v, %v", st, err)
			}
			waitGroupGone(t, polite.Pid())

			// One that ignores it: SIGKILL after the grace.
			stubborn := start(`trap "" TERM; sleep 1000 & echo ready; while :; do sleep 1; done`)
			began := time.Now()
			st, err = stubborn.Stop(ctx, 500*time.Millisecond)
			if err != nil || st != (berth.ExitStatus{Code: 137, Signal: "SIGKILL"}) {
				t.Fatalf("Stop of a stubborn process = %+v, %v", st, err)
			}
			if d := time.Since(began); d < 500*time.Millisecond {
				t.Errorf("SIGKILL came before the grace: %s", d)
			}
			waitGroupGone(t, stubborn.Pid())
			// Idempotent: the same answer, no new signal.
			if st2, err := stubborn.Stop(ctx, time.Second); err != nil || st2 != st {
				t.Errorf("second Stop = %+v, %v", st2, err)
			}
			if err := stubborn.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("Signal after the group is gone = %v", err)
			}
		})
	}
}

// waitGroupGone fails the test unless process group pgid empties within
// 10 s (killed is not yet gone from /proc on a loaded machine), its
// zombies reaped by the container's init included.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	for range 500 {
		if !procgroup.Alive(pgid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("process group %d still has %d live processes (zombies aside): alive=%v", pgid, groupSize(pgid), procgroup.Alive(pgid))
}

func TestSignalReachesLeftovers(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	ctx := t.Context()
	// The leader exits at once, leaving a child in its group that keeps
	// no stream open.
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: "sh", Args: []string{"-c", "sleep 1000 >/dev/null 2>&1 </dev/null & echo started"}})
	if err != nil {
		t.Fatal(err)
	}
	res := collect(t, proc)
	if res.stdout != "started\n" || !res.status.Success() {
		t.Fatalf("%+v", res)
	}
	if groupSize(proc.Pid()) != 1 {
		t.Fatalf("leftover group has %d processes, want 1", groupSize(proc.Pid()))
	}
	if err := proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("Signal to the leftovers: %v", err)
	}
	waitGroupGone(t, proc.Pid())
	// Stop after the leader's exit still reports its status.
	if st, err := proc.Stop(ctx, time.Second); err != nil || !st.Success() {
		t.Errorf("Stop = %+v, %v", st, err)
	}
}

func TestWaitConcurrent(t *testing.T) {
	p := newProvider(t, Options{})
	sb := openSandbox(t, p, berth.SandboxConfig{})
	proc, err := sb.Start(t.Context(), berth.ProcSpec{Path: "sh", Args: []string{"-c", "sleep 0.3; exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	go drain(proc.Stdout())
	go drain(proc.Stderr())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if st, err := proc.Wait(); err != nil || st.Code != 7 {
				t.Errorf("Wait = %+v, %v", st, err)
			}
		})
	}
	wg.Wait()
	if err := proc.Signal(os.Interrupt); !berth.IsCode(err, berth.EInvalid) && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after exit = %v", err)
	}
}

func TestWithoutHelper(t *testing.T) {
	// An image with its own shell and kill, and no busybox bound in: the
	// init and in-container signals use the image's /bin/sh.
	p := newProvider(t, Options{})
	ensureTestImage(t, p)
	p.helper = func() string { return "" }
	sb := openSandbox(t, p, berth.SandboxConfig{})
	if res := run(t, sb, nil, "sh", "-c", "ls /busybox.berth 2>/dev/null; cat /proc/1/cmdline | tr '\\0' ' '"); res.stdout != "/bin/sh -c "+initScript+" " {
		t.Errorf("init without the helper: %+v", res)
	}
	proc, err := sb.Start(t.Context(), berth.ProcSpec{Path: "sh", Args: []string{"-c", "sleep 1000 & echo ready; exec sleep 1001"}})
	if err != nil {
		t.Fatal(err)
	}
	pr := proc.(*Process)
	pr.forceExecSignal = true
	go drain(pr.Stderr())
	// Stop once the child is in the group.
	out := bufio.NewReader(pr.Stdout())
	if line, err := out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("got %q, %v", line, err)
	}
	go drain(out)
	st, err := pr.Stop(t.Context(), 5*time.Second)
	if err != nil || st != (berth.ExitStatus{Code: 143, Signal: "SIGTERM"}) {
		t.Fatalf("Stop through the image's kill = %+v, %v", st, err)
	}
	waitGroupGone(t, pr.Pid())
}
