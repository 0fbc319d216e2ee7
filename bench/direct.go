package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/internal/procgroup"
)

// directResult is the baseline bench measures beside the daemon, in the
// same run: the same agent started with no berth at all (exec, then ACP
// initialize and session/new over its stdio), and prompts sent to it
// straight over that stdio. Ratios are berth's p50 over the baseline's.
type directResult struct {
	CreateDirectP50Ms float64 `json:"create_direct_p50_ms,omitempty"`
	CreateDirectP99Ms float64 `json:"create_direct_p99_ms,omitempty"`
	CreateRatio       float64 `json:"create_ratio_p50,omitempty"`
	// AgentEventDirect* are prompt → first agent_message_chunk on the
	// agent's stdout, with no berth.
	AgentEventDirectP50Ms float64 `json:"prompt_first_agent_event_direct_p50_ms,omitempty"`
	AgentEventDirectP99Ms float64 `json:"prompt_first_agent_event_direct_p99_ms,omitempty"`
	// AgentEventShimRatio is berth with shims over berth without, the
	// cost of the relay; AgentEventDirectRatio is berth over no berth.
	AgentEventShimRatio   float64 `json:"prompt_first_agent_event_shim_ratio_p50,omitempty"`
	AgentEventDirectRatio float64 `json:"prompt_first_agent_event_direct_ratio_p50,omitempty"`
	// LoadAverage is /proc/loadavg's 1-minute figure at the end of the run.
	LoadAverage float64 `json:"load_average,omitempty"`
}

// directAgent is one agent started by bench itself, with no daemon, no
// shim and no sandbox: what berth's figures are compared with.
type directAgent struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	home  string
	sid   string
	next  int
}

// startDirect starts spec's agent in a directory of its own under root
// (its workspace and HOME, as berth gives each session) and completes the
// ACP handshake; the time is from exec to session/new's answer. sandbox
// bwrap starts it under bubblewrap, in namespaces of its own with the
// system directories read-only, as a user would isolate it by hand: the
// floor of a bwrap session's create.
func startDirect(spec berth.AgentSpec, root, sandbox string) (*directAgent, time.Duration, error) {
	dir, err := os.MkdirTemp(root, "direct-")
	if err != nil {
		return nil, 0, err
	}
	ws, home := filepath.Join(dir, "ws"), filepath.Join(dir, "home")
	for _, d := range []string{ws, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, 0, err
		}
	}
	cmd := exec.Command(spec.Command, spec.Args...)
	if sandbox == berth.SandboxBwrap {
		if cmd, err = bwrapDirect(spec, ws, home); err != nil {
			return nil, 0, err
		}
	}
	cmd.Dir = ws
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	cmd.Stderr = io.Discard
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	if err := procgroup.Start(cmd); err != nil {
		return nil, 0, err
	}
	a := &directAgent{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 64<<10), home: dir}
	if _, err := a.call(acp.MethodInitialize, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersion,
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FsCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true},
		ClientInfo:         &acp.Implementation{Name: "berth-bench", Version: "direct"}}, nil); err != nil {
		a.close()
		return nil, 0, err
	}
	res, err := a.call(acp.MethodSessionNew, acp.NewSessionRequest{Cwd: ws, McpServers: []acp.McpServer{}}, nil)
	if err != nil {
		a.close()
		return nil, 0, err
	}
	elapsed := time.Since(t0)
	var ns acp.NewSessionResponse
	if err := json.Unmarshal(res, &ns); err != nil || ns.SessionID == "" {
		a.close()
		return nil, 0, fmt.Errorf("direct agent: session/new answered %s", res)
	}
	a.sid = ns.SessionID
	return a, elapsed, nil
}

// directLine is the part of a JSON-RPC line the direct client reads.
type directLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// call sends one request and reads lines until its answer, calling
// onUpdate (when set) with each session/update notification before it.
// A request from the agent is refused: the bench prompts need none.
func (a *directAgent) call(method string, params any, onUpdate func(json.RawMessage)) (json.RawMessage, error) {
	a.next++
	id := strconv.Itoa(a.next)
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": a.next, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if _, err := a.stdin.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("direct agent: %s: %w", method, err)
	}
	for {
		b, err := a.out.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("direct agent: %s: %w", method, err)
		}
		var l directLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("direct agent: %s: a line that is not JSON-RPC: %w", method, err)
		}
		switch {
		case l.Method != "" && len(l.ID) > 0:
			refusal, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": l.ID,
				"error": map[string]any{"code": -32601, "message": "not offered by the bench"}})
			if _, err := a.stdin.Write(append(refusal, '\n')); err != nil {
				return nil, err
			}
		case l.Method == acp.MethodSessionUpdate:
			if onUpdate != nil {
				onUpdate(l.Params)
			}
		case string(bytes.TrimSpace(l.ID)) == id:
			if len(l.Error) > 0 && string(l.Error) != "null" {
				return nil, fmt.Errorf("direct agent: %s: %s", method, l.Error)
			}
			return l.Result, nil
		}
	}
}

// prompt sends text as a prompt and returns the time from sending it to
// the first agent_message_chunk the agent wrote, reading on to the answer.
func (a *directAgent) prompt(text string) (time.Duration, error) {
	var first time.Duration
	t0 := time.Now()
	_, err := a.call(acp.MethodSessionPrompt, acp.PromptRequest{SessionID: a.sid,
		Prompt: []acp.ContentBlock{acp.TextBlock(text)}}, func(p json.RawMessage) {
		if first == 0 && bytes.Contains(p, []byte(`"agent_message_chunk"`)) {
			first = time.Since(t0)
		}
	})
	if err == nil && first == 0 {
		err = fmt.Errorf("direct agent: the turn had no agent_message_chunk")
	}
	return first, err
}

// close ends the agent (end of its stdin, then its group is killed) and
// removes its directory.
func (a *directAgent) close() {
	_ = a.stdin.Close()
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_ = a.cmd.Wait()
	}()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = procgroup.Signal(a.cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	_ = os.RemoveAll(a.home)
}

// loadAverage is the 1-minute load average (0 when unknown).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// ratio is a over b, rounded to two places (0 when b is 0).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return float64(int(a/b*100+0.5)) / 100
}

// directCatalogAgent resolves the agent bench measures as a daemon with
// cfg would start it.
func directCatalogAgent(cfg *config.Config, name string) (berth.AgentSpec, error) {
	self, err := os.Executable()
	if err != nil {
		return berth.AgentSpec{}, err
	}
	catalog, err := cfg.Catalog(self)
	if err != nil {
		return berth.AgentSpec{}, err
	}
	spec, ok := catalog.Get(name)
	if !ok {
		return spec, berth.Errorf(berth.ENotFound, "no agent %q", name)
	}
	return spec, nil
}

// bwrapDirect is the command that starts spec's agent under bubblewrap
// with its workspace and HOME bound, and no network.
func bwrapDirect(spec berth.AgentSpec, ws, home string) (*exec.Cmd, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, err
	}
	prog, err := exec.LookPath(spec.Command)
	if err != nil {
		return nil, err
	}
	if prog, err = filepath.Abs(prog); err != nil {
		return nil, err
	}
	args := []string{"--unshare-all", "--die-with-parent", "--new-session"}
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc"} {
		args = append(args, "--ro-bind-try", d, d)
	}
	// /tmp first: the binds below it (a temporary home's) go over it.
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", prog, prog, "--bind", ws, ws, "--bind", home, home, "--chdir", ws, "--", prog)
	return exec.Command(bwrap, append(args, spec.Args...)...), nil
}
