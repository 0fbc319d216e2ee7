package shimcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/shim"
)

// helperEnv makes this test binary a shim program (runAsShim) instead of
// running the tests: Run given its stdin, its error on stderr.
const helperEnv = "BERTH_SHIMCMD_TEST_SHIM"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runAsShim())
	}
	os.Exit(m.Run())
}

// runAsShim is what a shim program's main does.
func runAsShim() int {
	if err := Run(context.Background(), Options{}, os.Stdin, os.Stdout, Local); err != nil {
		fmt.Fprintln(os.Stderr, "shim failed:", berth.ErrorMessage(err))
		return 1
	}
	return 0
}

// A shim whose agent cannot start says so in its ready line and in the
// session's shim log, which its stderr goes to once the start is over.
func TestTheShimLogHasWhatTheShimSaid(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	job := shim.Config{SessionID: "ses_1", Provider: berth.SandboxHost,
		Bundle:  shim.Bundle{Socket: filepath.Join(dir, "s.sock"), Spool: filepath.Join(dir, "s.spool"), PIDFile: filepath.Join(dir, "s.pid"), Log: filepath.Join(dir, "s.log")},
		Sandbox: berth.SandboxConfig{SessionID: "ses_1", Workspace: ws},
		Command: shim.Command{Path: filepath.Join(dir, "no-such-agent")}}
	b, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stdin = bytes.NewReader(b)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("the shim ran an agent that does not exist: %s", stdout.String())
	}
	var rd shim.Ready
	if err := json.Unmarshal(stdout.Bytes(), &rd); err != nil || rd.Stage != "start" {
		t.Fatalf("ready line %q (%v): want the start's failure", stdout.String(), err)
	}
	log, err := os.ReadFile(job.Log)
	if err != nil || !strings.Contains(string(log), "shim failed:") {
		t.Fatalf("the shim log holds %q (%v), want what the shim said; its stderr had %q", log, err, stderr.String())
	}
}

// A launch attaches to its agent on the connection the launcher made
// when it started the shim, and that connection stays the daemon's: the
// agent inherits no socket of the shim's (it could speak to the daemon
// as its shim), nor one the daemon itself inherited.
func TestTheAgentInheritsNoConnectionOfTheShim(t *testing.T) {
	dir := testenv.ShortTempDir(t, "shimcmd")
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A descriptor the daemon was handed by whatever started it (not
	// close-on-exec), which the shim inherits from it in turn.
	stray, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(stray[0])
	defer unix.Close(stray[1])
	l := shim.NewLauncher([]shim.Program{{Argv: []string{self}}}, []string{helperEnv + "=1"}, dir, 1)
	defer func() {
		l.Close()
		if err := l.WaitChildren(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	script := `for f in /proc/$$/fd/*; do echo "$f $(readlink "$f")"; done; echo done; read _`
	job := shim.Config{SessionID: "ses_1", Provider: berth.SandboxHost,
		Bundle:  shim.Bundle{Socket: filepath.Join(dir, "s.sock"), Spool: filepath.Join(dir, "s.spool"), PIDFile: filepath.Join(dir, "s.pid")},
		Sandbox: berth.SandboxConfig{SessionID: "ses_1", Workspace: ws},
		Command: shim.Command{Path: "/bin/sh", Args: []string{"-c", script}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, rd, err := l.Launch(ctx, job)
	if err != nil {
		t.Fatalf("launch: %v (ready %+v)", err, rd)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	var out strings.Builder
	sc := bufio.NewScanner(p.Stdout())
	for sc.Scan() && sc.Text() != "done" {
		out.WriteString(sc.Text() + "\n")
	}
	if sc.Text() != "done" {
		t.Fatalf("the agent's output ended early: %q (%v)", out.String(), sc.Err())
	}
	if strings.Contains(out.String(), "socket:") {
		t.Errorf("the agent holds a socket:\n%s", out.String())
	}
	if _, err := p.Stop(ctx, 5*time.Second); err != nil {
		t.Error(err)
	}
	p.Release()
}
