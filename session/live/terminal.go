package live

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/ids"
)

// defaultOutputLimit caps a terminal's kept output when the agent sets
// none; maxOutputLimit caps what an agent may ask for.
const (
	defaultOutputLimit = 1 << 20
	maxOutputLimit     = 16 << 20
)

// terminals are the commands an agent started through terminal/create.
type terminals struct {
	ls *Session
	// mu guards m (the lock order is written on Session).
	mu sync.Mutex
	m  map[string]*terminal
}

// terminal is one command started for the agent in the session's sandbox.
type terminal struct {
	id      string
	command string
	proc    berth.Process
	out     *capBuffer
	done    chan struct{} // closed once the process is reaped
	status  berth.ExitStatus
}

func newTerminals(ls *Session) *terminals {
	return &terminals{ls: ls, m: make(map[string]*terminal)}
}

// get returns a terminal by id or the JSON-RPC error for an unknown one.
func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	if !ok {
		return nil, &acp.Error{Code: acp.CodeResourceNotFound, Message: "unknown terminal " + id}
	}
	return t, nil
}

// create starts a terminal (see CreateTerminal).
func (ts *terminals) create(ctx context.Context, req acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	ls := ts.ls
	dir, inside, resolves := ls.files.workDir(req.Cwd)
	switch {
	case !inside:
		return acp.CreateTerminalResponse{}, ls.files.refuse("terminal", req.Cwd, "working directory outside the workspace")
	case !resolves:
		return acp.CreateTerminalResponse{}, ls.files.refuse("terminal", req.Cwd, "working directory resolves outside the workspace")
	}
	limit := defaultOutputLimit
	if req.OutputByteLimit != nil && *req.OutputByteLimit >= 0 {
		limit = min(*req.OutputByteLimit, maxOutputLimit)
	}
	// The command reads an empty stdin: it sees EOF rather than waiting.
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return acp.CreateTerminalResponse{}, &acp.Error{Code: acp.CodeInternal, Message: "no " + os.DevNull}
	}
	defer devNull.Close()
	env := make([]string, 0, len(req.Env))
	for _, e := range req.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	out := newCapBuffer(limit)
	sb, err := ls.box.open(ctx)
	if err != nil {
		return acp.CreateTerminalResponse{}, &acp.Error{Code: acp.CodeInternal, Message: "no sandbox for the command: " + berth.ErrorMessage(err)}
	}
	path, args := ls.box.besideArgv(req.Command, req.Args)
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: path, Args: args, Env: env, Dir: dir,
		Stdin: devNull, Stdout: out, Stderr: out})
	if err != nil {
		return acp.CreateTerminalResponse{}, &acp.Error{Code: acp.CodeInternal, Message: "command did not start: " + berth.ErrorMessage(err)}
	}
	t := &terminal{id: ids.New("term"), command: commandLine(req.Command, req.Args), proc: proc, out: out, done: make(chan struct{})}
	ts.add(t)
	turnID := ls.turns.currentID()
	ls.Emit(turnID, berth.EventTerminalStarted, map[string]any{"terminal_id": t.id, "command": t.command})
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		t.status, _ = proc.Wait()
		// Logged before wait_for_exit can answer, so it precedes the turn's end.
		exited := map[string]any{"terminal_id": t.id, "command": t.command,
			"exit_code": t.status.Code, "signal": t.status.Signal}
		if n := t.status.OOMKills; n > 0 {
			// The kernel killed processes of the sandbox at its memory
			// limit while the command ran: said where users look.
			exited["oom_kills"] = n
			ls.Emit(turnID, berth.EventRuntimeWarning, map[string]any{"reason": fmt.Sprintf(
				"out of memory: the sandbox reached its memory limit (memory_mb) and the kernel killed %d process(es) while %q ran", n, t.command)})
		}
		ls.Emit(turnID, berth.EventTerminalExited, exited)
		close(t.done)
	}()
	return acp.CreateTerminalResponse{TerminalID: t.id}, nil
}

// add registers t: a stopping session kills it.
func (ts *terminals) add(t *terminal) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.m[t.id] = t
}

// remove forgets terminal id.
func (ts *terminals) remove(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.m, id)
}

// closeAll kills every terminal and waits for them to be reaped.
func (ts *terminals) closeAll() {
	ts.mu.Lock()
	all := make([]*terminal, 0, len(ts.m))
	for id, t := range ts.m {
		all = append(all, t)
		delete(ts.m, id)
	}
	ts.mu.Unlock()
	for _, t := range all {
		_, _ = t.proc.Stop(context.Background(), time.Second)
		<-t.done
	}
}

// CreateTerminal starts a command in the session's sandbox, in the
// workspace (or a directory inside it).
func (h *agentHandler) CreateTerminal(ctx context.Context, req acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return h.ls.terminals.create(ctx, req)
}

// TerminalOutput returns the output so far and, once exited, the status.
func (h *agentHandler) TerminalOutput(ctx context.Context, req acp.TerminalRequest) (acp.TerminalOutputResponse, error) {
	t, err := h.ls.terminals.get(req.TerminalID)
	if err != nil {
		return acp.TerminalOutputResponse{}, err
	}
	out, truncated := t.out.snapshot()
	resp := acp.TerminalOutputResponse{Output: out, Truncated: truncated}
	select {
	case <-t.done:
		st := exitStatus(t.status)
		resp.ExitStatus = &st
	default:
	}
	return resp, nil
}

// WaitForTerminalExit waits for the command to end.
func (h *agentHandler) WaitForTerminalExit(ctx context.Context, req acp.TerminalRequest) (acp.TerminalExitStatus, error) {
	t, err := h.ls.terminals.get(req.TerminalID)
	if err != nil {
		return acp.TerminalExitStatus{}, err
	}
	select {
	case <-t.done:
		return exitStatus(t.status), nil
	case <-ctx.Done():
		return acp.TerminalExitStatus{}, &acp.Error{Code: acp.CodeInternal, Message: "session is stopping"}
	}
}

// KillTerminal kills the command but keeps its output readable.
func (h *agentHandler) KillTerminal(ctx context.Context, req acp.TerminalRequest) error {
	t, err := h.ls.terminals.get(req.TerminalID)
	if err != nil {
		return err
	}
	_, _ = t.proc.Stop(ctx, time.Second)
	return nil
}

// ReleaseTerminal kills the command if it still runs and forgets it.
func (h *agentHandler) ReleaseTerminal(ctx context.Context, req acp.TerminalRequest) error {
	ts := h.ls.terminals
	t, err := ts.get(req.TerminalID)
	if err != nil {
		return err
	}
	ts.remove(req.TerminalID)
	// Not ctx: the connection's context ends when the session stops, and
	// the command must be killed all the same.
	_, _ = t.proc.Stop(context.Background(), time.Second)
	<-t.done
	return nil
}

// exitStatus converts a berth exit status to ACP's.
func exitStatus(st berth.ExitStatus) acp.TerminalExitStatus {
	if st.Signal != "" {
		sig := st.Signal
		return acp.TerminalExitStatus{Signal: &sig}
	}
	code := st.Code
	return acp.TerminalExitStatus{ExitCode: &code}
}

// commandLine renders a command for events.
func commandLine(cmd string, args []string) string {
	s := cmd
	for _, a := range args {
		s += " " + strconv.Quote(a)
	}
	return s
}
