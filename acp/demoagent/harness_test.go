package demoagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testenv"
	acp "github.com/coder/acp-go-sdk"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 10 * time.Second

// testClient is an ACP client that records updates, serves fs/* under root,
// runs terminal/* with os/exec and answers permission requests.
type testClient struct {
	root string

	mu          sync.Mutex
	updates     []acp.SessionNotification
	writes      []acp.WriteTextFileRequest
	refuseWrite bool
	permission  func(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)
	permReqs    []acp.RequestPermissionRequest
	terms       map[string]*testTerminal
	termReqs    []acp.CreateTerminalRequest
	released    int
	nextTerm    int
}

type testTerminal struct {
	cmd  *exec.Cmd
	out  testenv.Buffer
	done chan struct{}
}

var _ acp.Client = (*testClient)(nil)

// kill kills the terminal's whole process group.
func (tt *testTerminal) kill() { _ = syscall.Kill(-tt.cmd.Process.Pid, syscall.SIGKILL) }

func (c *testClient) inRoot(p string) error {
	rel, err := filepath.Rel(c.root, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || !filepath.IsAbs(p) {
		return fmt.Errorf("path %s outside the workspace", p)
	}
	return nil
}

func (c *testClient) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	if err := c.inRoot(p.Path); err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	b, err := os.ReadFile(p.Path)
	if err != nil {
		return acp.ReadTextFileResponse{}, err
	}
	return acp.ReadTextFileResponse{Content: string(b)}, nil
}

func (c *testClient) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.mu.Lock()
	c.writes = append(c.writes, p)
	refuse := c.refuseWrite
	c.mu.Unlock()
	if refuse {
		return acp.WriteTextFileResponse{}, errors.New("write refused by test client")
	}
	if err := c.inRoot(p.Path); err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	if err := os.MkdirAll(filepath.Dir(p.Path), 0o755); err != nil {
		return acp.WriteTextFileResponse{}, err
	}
	return acp.WriteTextFileResponse{}, os.WriteFile(p.Path, []byte(p.Content), 0o644)
}

func (c *testClient) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.permReqs = append(c.permReqs, p)
	answer := c.permission
	c.mu.Unlock()
	if answer == nil {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(optAllow)}, nil
	}
	return answer(ctx, p)
}

func (c *testClient) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n)
	return nil
}

func (c *testClient) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	tt := &testTerminal{cmd: exec.Command(p.Command, p.Args...), done: make(chan struct{})}
	if p.Cwd != nil {
		tt.cmd.Dir = *p.Cwd
	}
	tt.cmd.Stdout = &tt.out
	tt.cmd.Stderr = &tt.out
	// Own process group, so a kill also reaches the shell's children (which
	// would otherwise keep the output pipe, and Wait, going).
	tt.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tt.cmd.WaitDelay = time.Second
	if err := tt.cmd.Start(); err != nil {
		return acp.CreateTerminalResponse{}, err
	}
	// Waited for by ReleaseTerminal or closeTerminals.
	go func() {
		_ = tt.cmd.Wait()
		close(tt.done)
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextTerm++
	id := fmt.Sprintf("term-%d", c.nextTerm)
	if c.terms == nil {
		c.terms = make(map[string]*testTerminal)
	}
	c.terms[id] = tt
	c.termReqs = append(c.termReqs, p)
	return acp.CreateTerminalResponse{TerminalId: id}, nil
}

func (c *testClient) term(id string) (*testTerminal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tt := c.terms[id]
	if tt == nil {
		return nil, fmt.Errorf("no terminal %s", id)
	}
	return tt, nil
}

func (c *testClient) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	tt, err := c.term(p.TerminalId)
	if err != nil {
		return acp.KillTerminalResponse{}, err
	}
	tt.kill()
	return acp.KillTerminalResponse{}, nil
}

func exitStatus(tt *testTerminal) *acp.TerminalExitStatus {
	select {
	case <-tt.done:
		code := tt.cmd.ProcessState.ExitCode()
		return &acp.TerminalExitStatus{ExitCode: &code}
	default:
		return nil
	}
}

func (c *testClient) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	tt, err := c.term(p.TerminalId)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	return acp.TerminalOutputResponse{Output: tt.out.String(), ExitStatus: exitStatus(tt)}, nil
}

func (c *testClient) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	tt, err := c.term(p.TerminalId)
	if err != nil {
		return acp.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-tt.done:
	case <-ctx.Done():
		return acp.WaitForTerminalExitResponse{}, ctx.Err()
	}
	st := exitStatus(tt)
	return acp.WaitForTerminalExitResponse{ExitCode: st.ExitCode}, nil
}

func (c *testClient) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	tt, err := c.term(p.TerminalId)
	if err != nil {
		return acp.ReleaseTerminalResponse{}, err
	}
	tt.kill()
	<-tt.done
	c.mu.Lock()
	delete(c.terms, p.TerminalId)
	c.released++
	c.mu.Unlock()
	return acp.ReleaseTerminalResponse{}, nil
}

// closeTerminals kills and waits for terminals the agent did not release.
func (c *testClient) closeTerminals() {
	c.mu.Lock()
	terms := c.terms
	c.terms = nil
	c.mu.Unlock()
	for _, tt := range terms {
		tt.kill()
		<-tt.done
	}
}

// sessionUpdates returns the updates recorded for one session, but for the
// commands the agent announces at session/new and load (see allUpdates).
func (c *testClient) sessionUpdates(sid acp.SessionId) []acp.SessionUpdate {
	var out []acp.SessionUpdate
	for _, u := range c.allUpdates(sid) {
		if u.AvailableCommandsUpdate == nil {
			out = append(out, u)
		}
	}
	return out
}

// allUpdates returns every update recorded for one session.
func (c *testClient) allUpdates(sid acp.SessionId) []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []acp.SessionUpdate
	for _, n := range c.updates {
		if n.SessionId == sid {
			out = append(out, n.Update)
		}
	}
	return out
}

// harness runs one agent (run) wired to an SDK client over io.Pipe pairs.
type harness struct {
	t       *testing.T
	client  *testClient
	conn    *acp.ClientSideConnection
	stderr  *testenv.Buffer
	root    string
	inW     *io.PipeWriter // client → agent stdin
	outW    *io.PipeWriter // agent stdout → client
	outR    *io.PipeReader
	done    chan int // run's exit code
	release chan struct{}
	stopped bool
	wg      sync.WaitGroup // goroutines started by async
}

// start runs an agent with args; it is stopped in t.Cleanup.
func start(t *testing.T, args ...string) *harness {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{
		t:       t,
		client:  &testClient{root: root},
		stderr:  &testenv.Buffer{},
		root:    root,
		inW:     inW,
		outW:    outW,
		outR:    outR,
		done:    make(chan int, 1),
		release: make(chan struct{}),
	}
	go func() {
		h.done <- run(args, inR, outW, h.stderr, options{release: h.release})
	}()
	// Hold the client's reads until its logger is set (SetLogger races with
	// the SDK's reader goroutine otherwise).
	ready := make(chan struct{})
	h.conn = acp.NewClientSideConnection(h.client, inW, &startReader{r: outR, start: ready})
	h.conn.SetLogger(slog.New(slog.DiscardHandler))
	close(ready)
	t.Cleanup(h.stop)
	return h
}

// stop closes the agent's stdin, waits for run to return, then closes its
// stdout and waits for the client connection to end.
func (h *harness) stop() {
	if h.stopped {
		return
	}
	h.stopped = true
	defer h.client.closeTerminals()
	close(h.release)
	_ = h.inW.Close()
	code, returned := 0, false
	select {
	case code = <-h.done:
		returned = true
	case <-h.conn.Done():
		// The client stopped reading: make the agent's writes fail instead
		// of blocking on the pipe.
		_ = h.outR.CloseWithError(io.ErrClosedPipe)
	case <-time.After(testTimeout):
		h.t.Errorf("neither the agent nor the client ended after stdin closed")
		return
	}
	if !returned {
		select {
		case code = <-h.done:
		case <-time.After(testTimeout):
			h.t.Errorf("agent did not return after stdin closed")
		}
	}
	if code != 0 {
		h.t.Errorf("agent exited %d; stderr:\n%s", code, h.stderr.String())
	}
	_ = h.outW.Close()
	select {
	case <-h.conn.Done():
	case <-time.After(testTimeout):
		h.t.Errorf("client connection did not end")
	}
	h.wg.Wait()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// initialize does the handshake with full client capabilities.
func (h *harness) initialize() acp.InitializeResponse {
	h.t.Helper()
	resp, err := h.conn.Initialize(ctxT(h.t), acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs:       acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: true,
		},
	})
	if err != nil {
		h.t.Fatalf("initialize: %v", err)
	}
	return resp
}

// newSession does initialize + session/new in the harness root.
func (h *harness) newSession() acp.SessionId {
	h.t.Helper()
	h.initialize()
	resp, err := h.conn.NewSession(ctxT(h.t), acp.NewSessionRequest{Cwd: h.root, McpServers: []acp.McpServer{}})
	if err != nil {
		h.t.Fatalf("session/new: %v", err)
	}
	return resp.SessionId
}

// prompt sends text and returns the stop reason.
func (h *harness) prompt(ctx context.Context, sid acp.SessionId, text string) (acp.StopReason, error) {
	resp, err := h.conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	return resp.StopReason, err
}

// mustPrompt sends text and fails unless the turn ends with want.
func (h *harness) mustPrompt(sid acp.SessionId, text string, want acp.StopReason) {
	h.t.Helper()
	got, err := h.prompt(ctxT(h.t), sid, text)
	if err != nil {
		h.t.Fatalf("prompt %q: %v; stderr:\n%s", text, err, h.stderr.String())
	}
	if got != want {
		h.t.Fatalf("prompt %q: stop reason %q, want %q", text, got, want)
	}
}

// messages concatenates the agent_message_chunks of a session.
func (h *harness) messages(sid acp.SessionId) string {
	var b strings.Builder
	for _, u := range h.client.sessionUpdates(sid) {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			b.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return b.String()
}

// waitFor polls cond until it holds or the test deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, testTimeout, what, cond)
}

// async runs f in a goroutine and returns a function that waits for it;
// stop also waits for it, after the connection is down.
func (h *harness) async(f func()) (wait func()) {
	done := make(chan struct{})
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(done)
		f()
	}()
	return func() { <-done }
}
