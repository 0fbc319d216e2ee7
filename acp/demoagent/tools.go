package demoagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

const (
	// permissionGrace is how long ask keeps waiting for the client's answer
	// after session/cancel: ACP says the client then answers pending
	// permission requests with the cancelled outcome.
	permissionGrace = 2 * time.Second
	// cleanupTimeout bounds terminal/kill and terminal/release.
	cleanupTimeout = 5 * time.Second
)

// Permission option ids offered by ask.
const (
	optAllow       = "allow"
	optAllowAlways = "allow_always"
	optReject      = "reject"
)

// absPath resolves p against the session cwd.
func (t *turn) absPath(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(t.cwd, p)
}

// errText is the human part of an error from the client.
func errText(err error) string {
	var re *acp.RequestError
	if errors.As(err, &re) {
		if m, ok := re.Data.(map[string]any); ok {
			if s, ok := m["error"].(string); ok && s != "" {
				return s
			}
			if s, ok := m["details"].(string); ok && s != "" {
				return s
			}
		}
		return re.Message
	}
	return err.Error()
}

// textContent is tool-call content holding text.
func textContent(s string) []acp.ToolCallContent {
	return []acp.ToolCallContent{acp.ToolContent(acp.TextBlock(s))}
}

// toolStatus sends a tool_call_update with a new status.
func (t *turn) toolStatus(id acp.ToolCallId, st acp.ToolCallStatus, opts ...acp.ToolCallUpdateOpt) error {
	return t.update(acp.UpdateToolCall(id, append([]acp.ToolCallUpdateOpt{acp.WithUpdateStatus(st)}, opts...)...))
}

// toolFailed marks a tool call failed with msg, and says prefix+msg. A
// cancelled turn only marks the call failed and ends the turn.
func (t *turn) toolFailed(id acp.ToolCallId, prefix, msg string) error {
	if t.ctx.Err() != nil {
		msg = "cancelled"
	}
	if err := t.toolStatus(id, acp.ToolCallStatusFailed, acp.WithUpdateContent(textContent(msg))); err != nil {
		return err
	}
	if t.ctx.Err() != nil {
		return errCancelled
	}
	return t.say(prefix + msg)
}

// write: PATH TEXT → fs/write_text_file, then "wrote PATH".
func (t *turn) write(args string) error {
	path, text := cutWord(args)
	if path == "" {
		return t.say("usage: write PATH TEXT")
	}
	abs := t.absPath(path)
	id := t.a.nextToolCallID()
	if err := t.update(acp.StartEditToolCall(id, "write "+path, abs, text)); err != nil {
		return err
	}
	prefix := "write " + path + ": "
	if !t.a.caps().Fs.WriteTextFile {
		return t.toolFailed(id, prefix, "client does not support fs/write_text_file")
	}
	if err := t.toolStatus(id, acp.ToolCallStatusInProgress); err != nil {
		return err
	}
	_, err := t.a.conn.WriteTextFile(t.ctx, acp.WriteTextFileRequest{SessionId: acp.SessionId(t.s.id), Path: abs, Content: text})
	if err != nil {
		return t.toolFailed(id, prefix, errText(err))
	}
	if err := t.toolStatus(id, acp.ToolCallStatusCompleted, acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolDiffContent(abs, text)})); err != nil {
		return err
	}
	return t.say("wrote " + path)
}

// read: PATH → fs/read_text_file, then the content as a message.
func (t *turn) read(args string) error {
	path := strings.TrimSpace(args)
	if path == "" {
		return t.say("usage: read PATH")
	}
	abs := t.absPath(path)
	id := t.a.nextToolCallID()
	if err := t.update(acp.StartReadToolCall(id, "read "+path, abs)); err != nil {
		return err
	}
	prefix := "read " + path + ": "
	if !t.a.caps().Fs.ReadTextFile {
		return t.toolFailed(id, prefix, "client does not support fs/read_text_file")
	}
	if err := t.toolStatus(id, acp.ToolCallStatusInProgress); err != nil {
		return err
	}
	resp, err := t.a.conn.ReadTextFile(t.ctx, acp.ReadTextFileRequest{SessionId: acp.SessionId(t.s.id), Path: abs})
	if err != nil {
		return t.toolFailed(id, prefix, errText(err))
	}
	if err := t.toolStatus(id, acp.ToolCallStatusCompleted, acp.WithUpdateContent(textContent(resp.Content))); err != nil {
		return err
	}
	return t.say(resp.Content)
}

// runCmd: CMD… → terminal/create (sh -c), wait_for_exit, output, release;
// then the output (one trailing newline dropped) as a message, plus
// "exit status …" when the command did not exit 0.
func (t *turn) runCmd(args string) error {
	cmd := strings.TrimSpace(args)
	if cmd == "" {
		return t.say("usage: run CMD")
	}
	id := t.a.nextToolCallID()
	if err := t.update(acp.StartToolCall(id, cmd,
		acp.WithStartKind(acp.ToolKindExecute),
		acp.WithStartStatus(acp.ToolCallStatusPending),
		acp.WithStartRawInput(map[string]any{"command": cmd}))); err != nil {
		return err
	}
	prefix := "run: "
	if !t.a.caps().Terminal {
		return t.toolFailed(id, prefix, "client does not support terminals")
	}
	sid := acp.SessionId(t.s.id)
	cwd := t.cwd
	term, err := t.a.conn.CreateTerminal(t.ctx, acp.CreateTerminalRequest{SessionId: sid, Command: "sh", Args: []string{"-c", cmd}, Cwd: &cwd})
	if err != nil {
		return t.toolFailed(id, prefix, errText(err))
	}
	tid := term.TerminalId
	// Release the terminal whatever happens, even after a cancel.
	defer func() {
		ctx, cancel := context.WithTimeout(t.nctx, cleanupTimeout)
		defer cancel()
		_, _ = t.a.conn.ReleaseTerminal(ctx, acp.ReleaseTerminalRequest{SessionId: sid, TerminalId: tid})
	}()
	if err := t.toolStatus(id, acp.ToolCallStatusInProgress, acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolTerminalRef(tid)})); err != nil {
		return err
	}
	exit, err := t.a.conn.WaitForTerminalExit(t.ctx, acp.WaitForTerminalExitRequest{SessionId: sid, TerminalId: tid})
	if err != nil {
		if t.ctx.Err() != nil {
			ctx, cancel := context.WithTimeout(t.nctx, cleanupTimeout)
			_, _ = t.a.conn.KillTerminal(ctx, acp.KillTerminalRequest{SessionId: sid, TerminalId: tid})
			cancel()
		}
		return t.toolFailed(id, prefix, errText(err))
	}
	out, err := t.a.conn.TerminalOutput(t.ctx, acp.TerminalOutputRequest{SessionId: sid, TerminalId: tid})
	if err != nil {
		return t.toolFailed(id, prefix, errText(err))
	}
	raw := map[string]any{"output": out.Output, "exitCode": exit.ExitCode, "signal": exit.Signal}
	st := acp.ToolCallStatusCompleted
	ok := exit.ExitCode != nil && *exit.ExitCode == 0
	if !ok {
		st = acp.ToolCallStatusFailed
	}
	if err := t.toolStatus(id, st, acp.WithUpdateRawOutput(raw)); err != nil {
		return err
	}
	if text := strings.TrimSuffix(out.Output, "\n"); text != "" {
		if err := t.say(text); err != nil {
			return err
		}
	}
	if !ok {
		return t.say(describeExit(exit))
	}
	return nil
}

// describeExit words a non-zero terminal exit.
func describeExit(e acp.WaitForTerminalExitResponse) string {
	switch {
	case e.ExitCode != nil:
		return fmt.Sprintf("exit status %d", *e.ExitCode)
	case e.Signal != nil:
		return "killed by signal " + *e.Signal
	default:
		return "exit status unknown"
	}
}

// graceCtx is the context of a request the agent makes of the client
// during the turn (a permission, a question): after session/cancel it
// still waits permissionGrace for the client's "cancelled" answer instead
// of abandoning the request at once. done releases it.
func (t *turn) graceCtx() (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.ctx))
	stop := context.AfterFunc(t.ctx, func() {
		select {
		case <-time.After(permissionGrace):
			cancel()
		case <-ctx.Done():
		}
	})
	return ctx, func() {
		stop()
		cancel()
	}
}

// ask: TEXT → session/request_permission, then the outcome as a message. A
// cancelled outcome (or a session/cancel meanwhile) ends the turn cancelled.
func (t *turn) ask(args string) error {
	title := strings.TrimSpace(args)
	id := t.a.nextToolCallID()
	if err := t.update(acp.StartToolCall(id, title,
		acp.WithStartKind(acp.ToolKindEdit),
		acp.WithStartStatus(acp.ToolCallStatusPending))); err != nil {
		return err
	}

	pctx, done := t.graceCtx()
	defer done()
	resp, err := t.a.conn.RequestPermission(pctx, acp.RequestPermissionRequest{
		SessionId: acp.SessionId(t.s.id),
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: id,
			Title:      acp.Ptr(title),
			Kind:       acp.Ptr(acp.ToolKindEdit),
			Status:     acp.Ptr(acp.ToolCallStatusPending),
		},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: optAllow},
			{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always allow", OptionId: optAllowAlways},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: optReject},
		},
	})
	switch {
	case err == nil && resp.Outcome.Selected != nil && t.ctx.Err() == nil:
		opt := string(resp.Outcome.Selected.OptionId)
		if opt == optReject {
			if err := t.toolStatus(id, acp.ToolCallStatusFailed); err != nil {
				return err
			}
			return t.say("permission: rejected")
		}
		if err := t.toolStatus(id, acp.ToolCallStatusCompleted); err != nil {
			return err
		}
		return t.say("permission: " + opt)
	case err != nil && t.ctx.Err() == nil:
		return t.toolFailed(id, "permission: error: ", errText(err))
	default:
		// Cancelled outcome, or the turn was cancelled while asking.
		if err := t.toolStatus(id, acp.ToolCallStatusFailed); err != nil {
			return err
		}
		if err := t.say("permission: cancelled"); err != nil {
			return err
		}
		return errCancelled
	}
}
