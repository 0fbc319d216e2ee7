package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/pathx"
)

// execData is the data of an exec event.
type execData struct {
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	Signal     string `json:"signal,omitempty"`
	TimedOut   bool   `json:"timed_out"`
	DurationMS int64  `json:"duration_ms"`
}

// Exec implements berth.SessionService: the command runs through the
// session's sandbox, in its workspace, with an empty stdin; at the deadline
// its whole process group is killed. Each exec is logged as an exec event.
func (m *Manager) Exec(ctx context.Context, id string, req berth.ExecRequest) (*berth.ExecResult, error) {
	if err := m.awaitBoot(ctx, id); err != nil {
		return nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	rt := m.runtimeOf(id)
	if rt == nil {
		if _, err := m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
		return nil, berth.Errorf(berth.EConflict, "session is stopped: resume it to run commands in its sandbox")
	}
	if err := rt.awaitHandshake(ctx); err != nil {
		return nil, err
	}
	return rt.exec(context.WithoutCancel(ctx), req)
}

// exec runs one command; the runtime owns it (rt.wg) and kills it with
// the session's terminals when the session stops.
func (rt *runtime) exec(ctx context.Context, req berth.ExecRequest) (*berth.ExecResult, error) {
	dir := rt.workspace
	if req.Cwd != "" {
		rel, ok := rt.relPath(req.Cwd)
		if !ok {
			return nil, berth.Errorf(berth.EInvalid, "cwd is outside the workspace")
		}
		dir = filepath.Join(rt.workspace, rel)
		if real, err := filepath.EvalSymlinks(dir); err != nil || !pathx.Within(rt.wsReal, real) {
			return nil, berth.Errorf(berth.EInvalid, "cwd does not exist inside the workspace")
		}
	}
	env := make([]string, 0, len(req.Env))
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "open %s", os.DevNull)
	}
	defer devNull.Close()

	rt.mu.Lock()
	if err := rt.acceptingLocked(); err != nil {
		rt.mu.Unlock()
		return nil, err
	}
	rt.wg.Add(1)
	rt.mu.Unlock()
	defer rt.wg.Done()

	stdout, stderr := newCapBuffer(berth.MaxExecOutput), newCapBuffer(berth.MaxExecOutput)
	start := time.Now()
	sb, err := rt.box(ctx)
	if err != nil {
		return nil, err
	}
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: req.Command[0], Args: req.Command[1:], Env: env, Dir: dir,
		Stdin: devNull, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "command did not start")
	}
	// Registered like a terminal, so a stopping session kills it too.
	t := &terminal{id: ids.New("exec"), command: strings.Join(req.Command, " "), proc: proc, out: stdout, done: make(chan struct{})}
	rt.terminals.mu.Lock()
	rt.terminals.m[t.id] = t
	rt.terminals.mu.Unlock()
	defer func() {
		rt.terminals.mu.Lock()
		delete(rt.terminals.m, t.id)
		rt.terminals.mu.Unlock()
	}()

	waited := make(chan berth.ExitStatus, 1)
	go func() {
		st, _ := proc.Wait()
		close(t.done)
		waited <- st
	}()
	timer := time.NewTimer(time.Duration(req.TimeoutSeconds) * time.Second)
	defer timer.Stop()
	var st berth.ExitStatus
	timedOut := false
	select {
	case st = <-waited:
	case <-timer.C:
		timedOut = true
		// Stop kills the whole group and reaps; waited then has the status.
		_, _ = proc.Stop(ctx, 0)
		st = <-waited
	}
	res := &berth.ExecResult{ExitCode: st.Code, Signal: st.Signal, TimedOut: timedOut,
		DurationMS: time.Since(start).Milliseconds()}
	res.Stdout, res.StdoutTruncated = stdout.snapshot()
	res.Stderr, res.StderrTruncated = stderr.snapshot()

	rt.mu.Lock()
	// A session that stopped meanwhile has logged its last event already.
	if !rt.exited {
		rt.emit(rt.currentTurnIDLocked(), berth.EventExec, execData{Command: t.command, ExitCode: st.Code, Signal: st.Signal,
			TimedOut: timedOut, DurationMS: res.DurationMS})
	}
	rt.mu.Unlock()
	return res, nil
}
