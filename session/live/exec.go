package live

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// ExecData is the data of an exec event.
type ExecData struct {
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	Signal     string `json:"signal,omitempty"`
	TimedOut   bool   `json:"timed_out"`
	DurationMS int64  `json:"duration_ms"`
}

// Exec runs one command; the live session owns it (ls.wg) and kills it with
// the session's terminals when the session stops.
func (ls *Session) Exec(ctx context.Context, req berth.ExecRequest) (*berth.ExecResult, error) {
	dir, inside, resolves := ls.files.workDir(req.Cwd)
	switch {
	case !inside:
		return nil, berth.Errorf(berth.EInvalid, "cwd is outside the workspace")
	case !resolves:
		return nil, berth.Errorf(berth.EInvalid, "cwd does not exist inside the workspace")
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

	ls.mu.Lock()
	if err := ls.queue.acceptingLocked(); err != nil {
		ls.mu.Unlock()
		return nil, err
	}
	ls.wg.Add(1)
	ls.mu.Unlock()
	defer ls.wg.Done()

	stdout, stderr := newCapBuffer(berth.MaxExecOutput), newCapBuffer(berth.MaxExecOutput)
	start := time.Now()
	sb, err := ls.box.open(ctx)
	if err != nil {
		return nil, err
	}
	path, args := ls.box.besideArgv(req.Command[0], req.Command[1:])
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: path, Args: args, Env: env, Dir: dir,
		Stdin: devNull, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return nil, berth.WrapError(berth.EInvalid, err, "command did not start")
	}
	// Registered like a terminal, so a stopping session kills it too.
	t := &terminal{id: ids.New("exec"), command: strings.Join(req.Command, " "), proc: proc, out: stdout, done: make(chan struct{})}
	ls.terminals.add(t)
	defer ls.terminals.remove(t.id)

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

	ls.mu.Lock()
	// A session that stopped meanwhile has logged its last event already.
	if !ls.exited {
		ls.Emit(ls.turns.currentIDLocked(), berth.EventExec, ExecData{Command: t.command, ExitCode: st.Code, Signal: st.Signal,
			TimedOut: timedOut, DurationMS: res.DurationMS})
	}
	ls.mu.Unlock()
	return res, nil
}
