package demoagent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"go.uber.org/goleak"

	"github.com/berth-sh/berth/internal/mcptest"
	"github.com/berth-sh/berth/internal/testenv"
)

// childEnv makes the test binary run Main as a real agent process.
const childEnv = "BERTH_DEMOAGENT_CHILD"

func TestMain(m *testing.M) {
	// The test MCP server the `mcp` tests start as a stdio server.
	mcptest.MaybeServeStdio()
	if os.Getenv(childEnv) == "1" {
		os.Exit(Main(strings.Fields(os.Getenv(childEnv+"_ARGS")), os.Stdin, os.Stdout, os.Stderr))
	}
	// Every goroutine a test starts (and the agent's) must be gone at the end.
	goleak.VerifyTestMain(m)
}

// proc is the demo agent running as a child process.
type proc struct {
	conn   *acp.ClientSideConnection
	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout
	stderr *testenv.Buffer
	exited chan error // cmd.Wait's result
	cmd    *exec.Cmd
}

// startProc runs the agent in a child process, with an SDK client on its
// stdio. The child is killed and waited for in t.Cleanup.
func startProc(t *testing.T, client acp.Client, args string) *proc {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{stdin: inW, stdout: outR, stderr: &testenv.Buffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), childEnv+"=1", childEnv+"_ARGS="+args)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = inR, outW, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child has its own copies now.
	_ = inR.Close()
	_ = outW.Close()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		p.exited <- p.cmd.Wait()
	}()
	ready := make(chan struct{})
	p.conn = acp.NewClientSideConnection(client, inW, &startReader{r: outR, start: ready})
	p.conn.SetLogger(slog.New(slog.DiscardHandler))
	close(ready)
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-waited
		_ = inW.Close()
		<-p.conn.Done()
		_ = outR.Close()
	})
	return p
}

// wait returns the child's exit code once it exits, failing after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case err := <-p.exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("wait: %v", err)
		}
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("agent process did not exit; stderr:\n%s", p.stderr.String())
		return 0
	}
}

func (p *proc) session(t *testing.T, cwd string) acp.SessionId {
	t.Helper()
	if _, err := p.conn.Initialize(ctxT(t), acp.InitializeRequest{ProtocolVersion: 1}); err != nil {
		t.Fatal(err)
	}
	resp, err := p.conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.SessionId
}

func (p *proc) prompt(ctx context.Context, sid acp.SessionId, text string) (acp.StopReason, error) {
	resp, err := p.conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	return resp.StopReason, err
}

func TestProcessExitsOnEOF(t *testing.T) {
	p := startProc(t, &testClient{}, "--state-dir "+t.TempDir())
	sid := p.session(t, t.TempDir())
	if r, err := p.prompt(ctxT(t), sid, "echo hi\nstderr to stderr"); err != nil || r != acp.StopReasonEndTurn {
		t.Fatalf("prompt = %q, %v", r, err)
	}
	_ = p.stdin.Close()
	if code := p.wait(t, testTimeout); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if got := p.stderr.String(); got != "to stderr\n" {
		t.Errorf("stderr = %q", got)
	}
}

func TestProcessCrash(t *testing.T) {
	c := &testClient{}
	p := startProc(t, c, "")
	sid := p.session(t, t.TempDir())
	if _, err := p.prompt(ctxT(t), sid, "echo before\ncrash 7\necho after"); err == nil {
		t.Error("crashed prompt answered")
	}
	if code := p.wait(t, testTimeout); code != 7 {
		t.Errorf("exit code %d, want 7", code)
	}
}

func TestProcessHangNeedsKill(t *testing.T) {
	p := startProc(t, &testClient{}, "")
	sid := p.session(t, t.TempDir())
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.prompt(ctx, sid, "hang"); err == nil {
		t.Fatal("hung prompt answered")
	}
	_ = p.stdin.Close()
	// A hung agent ignores stdin EOF: it is still running a while later.
	select {
	case err := <-p.exited:
		t.Fatalf("hung agent exited after EOF: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_ = p.cmd.Process.Kill()
	if code := p.wait(t, testTimeout); code != -1 {
		t.Errorf("exit code %d, want -1 (killed)", code)
	}
}
