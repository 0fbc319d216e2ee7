package host

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a sandbox's workspace, home and sandbox.
type env struct {
	workspace, home string
	sb              berth.Sandbox
}

// open opens a host sandbox on fresh directories.
func open(t *testing.T, vars map[string]string) env {
	t.Helper()
	e := env{workspace: t.TempDir(), home: t.TempDir()}
	sb, err := New().Open(context.Background(), berth.SandboxConfig{
		SessionID: "ses_test", Workspace: e.workspace, Home: e.home, Env: vars,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close(context.Background()) })
	e.sb = sb
	return e
}

// start starts spec and makes sure the process is stopped when the test ends.
func start(t *testing.T, sb berth.Sandbox, spec berth.ProcSpec) berth.Process {
	t.Helper()
	p, err := sb.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("start %s: %v", spec.Path, err)
	}
	t.Cleanup(func() {
		_, _ = p.Stop(context.Background(), 0)
		for _, r := range []io.ReadCloser{p.Stdout(), p.Stderr()} {
			if r != nil {
				_ = r.Close()
			}
		}
	})
	return p
}

// sh runs a shell script in sb.
func sh(t *testing.T, sb berth.Sandbox, script string) berth.Process {
	t.Helper()
	return start(t, sb, berth.ProcSpec{Path: "sh", Args: []string{"-c", script}})
}

// output reads all of p's stdout and waits for p.
func output(t *testing.T, p berth.Process) (string, berth.ExitStatus) {
	t.Helper()
	b, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return string(b), st
}

// readLine reads one line of p's stdout through r.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading a line: %v", err)
	}
	return strings.TrimSpace(line)
}

// groupGone reports whether no process of group pgid exists any more.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// procAbsent reports whether pid has left the process table (reaped).
func procAbsent(pid int) bool {
	_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return errors.Is(err, os.ErrNotExist)
}

func TestProvider(t *testing.T) {
	p := New()
	if p.Name() != "host" {
		t.Errorf("Name = %q", p.Name())
	}
	if err := p.Probe(context.Background()); err != nil {
		t.Errorf("Probe = %v", err)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("BERTH_HOST_TEST_SECRET", "leaked")
	e := open(t, map[string]string{"FOO": "bar", "HOME": "/not/this"})
	p := start(t, e.sb, berth.ProcSpec{Path: "env", Env: []string{"SPEC=1", "FOO=spec"}})
	out, st := output(t, p)
	if !st.Success() {
		t.Fatalf("env: %+v", st)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = v
	}
	if _, ok := vars["BERTH_HOST_TEST_SECRET"]; ok {
		t.Error("a daemon variable not passed is visible")
	}
	want := map[string]string{"HOME": e.home, "FOO": "spec", "SPEC": "1", "PATH": os.Getenv("PATH")}
	for k, v := range want {
		if vars[k] != v {
			t.Errorf("%s = %q, want %q", k, vars[k], v)
		}
	}

	// A PATH in the sandbox's env replaces the daemon's, for lookup too.
	e = open(t, map[string]string{"PATH": "/nonexistent"})
	_, err := e.sb.Start(context.Background(), berth.ProcSpec{Path: "env"})
	if !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("start with a PATH lacking env: %v, want EUnavailable", err)
	}
	bin := filepath.Dir(mustLookPath(t, "env"))
	e = open(t, map[string]string{"PATH": bin})
	out, _ = output(t, start(t, e.sb, berth.ProcSpec{Path: "env"}))
	if !strings.Contains(out, "PATH="+bin+"\n") {
		t.Errorf("PATH not the sandbox's: %q", out)
	}
}

// mustLookPath finds file in the test's PATH.
func mustLookPath(t *testing.T, file string) string {
	t.Helper()
	p, err := lookPath(file, os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWorkingDirectory(t *testing.T) {
	e := open(t, nil)
	if err := os.Mkdir(filepath.Join(e.workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(e.workspace)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ dir, want string }{
		{"", real},
		{"sub", filepath.Join(real, "sub")},
		{e.home, e.home},
	}
	for _, tc := range cases {
		out, _ := output(t, start(t, e.sb, berth.ProcSpec{Path: "pwd", Args: []string{"-P"}, Dir: tc.dir}))
		want, _ := filepath.EvalSymlinks(tc.want)
		if strings.TrimSpace(out) != want {
			t.Errorf("Dir %q: pwd = %q, want %q", tc.dir, strings.TrimSpace(out), want)
		}
	}
}

func TestStopKillsGrandchildren(t *testing.T) {
	e := open(t, nil)
	p := sh(t, e.sb, "sleep 100 & sleep 100")
	if _, err := p.Stop(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if !procAbsent(p.Pid()) {
		t.Error("leader left as a zombie")
	}
	// Orphaned grandchildren are reaped by PID 1: poll.
	testenv.WaitFor(t, 10*time.Second, "the group to be empty", func() bool { return groupGone(p.Pid()) })
}

func TestStopKillsLeftoversOfAnExitedLeader(t *testing.T) {
	e := open(t, nil)
	p := sh(t, e.sb, `trap "" TERM; sleep 100 & exit 0`)
	st, err := p.Wait()
	if err != nil || !st.Success() {
		t.Fatalf("leader: %+v, %v", st, err)
	}
	if groupGone(p.Pid()) {
		t.Fatal("the background child is already gone")
	}
	st, err = p.Stop(context.Background(), 50*time.Millisecond)
	if err != nil || !st.Success() {
		t.Errorf("Stop after exit = %+v, %v; want the leader's status", st, err)
	}
	testenv.WaitFor(t, 10*time.Second, "the group to be empty", func() bool { return groupGone(p.Pid()) })
}

func TestStopHonoursContext(t *testing.T) {
	e := open(t, nil)
	p := sh(t, e.sb, `trap "" TERM; echo ready; sleep 100`)
	if line := readLine(t, bufio.NewReader(p.Stdout())); line != "ready" {
		t.Fatalf("got %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _ = p.Stop(ctx, time.Hour)
	// The context cut the grace short: SIGKILL went out early.
	st, err := p.Wait()
	if err != nil || st.Signal != "SIGKILL" {
		t.Errorf("Wait = %+v, %v; want SIGKILL", st, err)
	}
}

func TestStopIdempotentAndConcurrent(t *testing.T) {
	e := open(t, nil)
	p := start(t, e.sb, berth.ProcSpec{Path: "sleep", Args: []string{"100"}})
	results := make(chan berth.ExitStatus, 3)
	for range 3 {
		go func() {
			st, err := p.Stop(context.Background(), time.Second)
			if err != nil {
				t.Error(err)
			}
			results <- st
		}()
	}
	want := berth.ExitStatus{Code: 143, Signal: "SIGTERM"}
	for range 3 {
		if st := <-results; st != want {
			t.Errorf("Stop = %+v, want %+v", st, want)
		}
	}
	if st, err := p.Stop(context.Background(), time.Second); err != nil || st != want {
		t.Errorf("Stop again = %+v, %v", st, err)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after Stop = %v, want os.ErrProcessDone", err)
	}
}

func TestWaitFromTwoGoroutines(t *testing.T) {
	e := open(t, nil)
	p := sh(t, e.sb, "read x; exit 5")
	results := make(chan berth.ExitStatus, 2)
	for range 2 {
		go func() {
			st, err := p.Wait()
			if err != nil {
				t.Error(err)
			}
			results <- st
		}()
	}
	if _, err := io.WriteString(p.Stdin(), "go\n"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st := <-results; st.Code != 5 {
			t.Errorf("Wait = %+v, want code 5", st)
		}
	}
	if !procAbsent(p.Pid()) {
		t.Error("exited process left as a zombie")
	}
	// Stdin is closed once the process is gone.
	if _, err := io.WriteString(p.Stdin(), "more\n"); err == nil {
		t.Error("write to a dead process's stdin succeeded")
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	testenv.Touch(t, file)
	for _, cfg := range []berth.SandboxConfig{
		{Workspace: ""},
		{Workspace: "relative"},
		{Workspace: filepath.Join(dir, "missing")},
		{Workspace: file},
		{Workspace: dir, Home: "relative"},
		{Workspace: dir, Home: filepath.Join(dir, "missing")},
	} {
		_, err := New().Open(ctx, cfg)
		if !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("Open(%+v) = %v, want EInvalid", cfg, err)
		}
		if err != nil && strings.Contains(berth.ErrorMessage(err), dir) {
			t.Errorf("message %q holds a host path", berth.ErrorMessage(err))
		}
	}

	e := open(t, nil)
	if _, err := e.sb.Start(ctx, berth.ProcSpec{}); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("empty path: %v", err)
	}
	for _, kv := range []string{"NOEQUALS", "A=b\x00c"} {
		if _, err := e.sb.Start(ctx, berth.ProcSpec{Path: "true", Env: []string{kv}}); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("bad env %q: %v", kv, err)
		}
	}
	if _, err := e.sb.Start(ctx, berth.ProcSpec{Path: "berth-no-such-command"}); !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("missing command: %v", err)
	}
	if _, err := e.sb.Start(ctx, berth.ProcSpec{Path: file}); !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("not executable: %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.sb.Start(canceled, berth.ProcSpec{Path: "true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: %v", err)
	}
	if err := e.sb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.sb.Close(ctx); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := e.sb.Start(ctx, berth.ProcSpec{Path: "true"}); !berth.IsCode(err, berth.EUnavailable) {
		t.Errorf("start after Close: %v", err)
	}
}
