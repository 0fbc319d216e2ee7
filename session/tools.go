package session

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/session/transcript"

	live "github.com/berth-sh/berth/session/live"
)

// The berth MCP server's tools as one session (docs/api.md, "The berth MCP server: agents spawn children"): what
// `berth mcp`, run by that session's agent, asks for over the session's
// tools socket (toolgate.go). Every call acts only on the session's own
// subtree, through the same Manager methods as the API, so the same
// limits hold (SpawnChild's narrowing, max_children, max_depth, ttl).

// Bounds of the tools' arguments (the MCP server's input schemas carry
// the same).
const (
	// waitRecheck is how often wait_child looks at the child again when
	// its log is quiet: a state change between two events is never missed.
	waitRecheck = time.Second
)

// childTools implements berth.ChildTools for the session id.
type childTools struct {
	m  *Manager
	id string
}

var _ berth.ChildTools = (*childTools)(nil)

// SpawnChild spawns a child of the caller, defaulting its agent to the
// caller's own.
func (t *childTools) SpawnChild(ctx context.Context, a berth.SpawnChildArgs) (*berth.SpawnChildResult, error) {
	agent := a.Agent
	if agent == "" {
		self, err := t.m.GetSession(ctx, t.id)
		if err != nil {
			return nil, err
		}
		agent = self.Agent
	}
	s, err := t.m.SpawnChild(ctx, t.id, berth.CreateRequest{Agent: agent, Name: a.Name, Prompt: a.Prompt,
		TTLSeconds: a.TTLSeconds, PermissionMode: a.PermissionMode, Network: a.Network,
		MaxCostUSD: a.MaxCostUSD, MaxTokens: a.MaxTokens}, "")
	if err != nil {
		return nil, err
	}
	return &berth.SpawnChildResult{ChildID: s.ID, State: s.State}, nil
}

// PromptChild prompts a session of the caller's subtree (queued behind
// its turn in flight), and with Wait answers once that prompt's turn ends.
func (t *childTools) PromptChild(ctx context.Context, a berth.PromptChildArgs) (*berth.PromptChildResult, error) {
	if _, err := t.inTree(ctx, a.ChildID); err != nil {
		return nil, err
	}
	res, err := t.m.Prompt(ctx, a.ChildID, berth.PromptRequest{Text: a.Text})
	if err != nil {
		return nil, err
	}
	out := &berth.PromptChildResult{Status: res.Status, TurnID: res.TurnID, EntryID: res.EntryID}
	target := res.TurnID
	if target == "" {
		target = res.EntryID
	}
	if !a.Wait || target == "" {
		return out, nil
	}
	turn, err := t.m.WaitTurn(ctx, a.ChildID, target)
	if err != nil {
		return nil, err
	}
	// An agent gets its child's answer up to maxTurnText (the log has it all).
	text := turn.Text
	if turn.Long != nil {
		if text, err = turn.Long.Head(ctx, live.MaxTurnText); err != nil {
			return nil, err
		}
	}
	out.TurnID, out.StopReason, out.Text = turn.TurnID, turn.StopReason, transcript.ClipText(text, live.MaxTurnText)
	return out, nil
}

// WaitChild waits, up to TimeoutSeconds, until a session of the caller's
// subtree has nothing left to do, and answers its state and last message.
func (t *childTools) WaitChild(ctx context.Context, a berth.WaitChildArgs) (*berth.WaitChildResult, error) {
	if a.TimeoutSeconds < 0 || a.TimeoutSeconds > berth.MaxWaitChildSeconds {
		return nil, &berth.Error{Code: berth.EInvalid, Message: fmt.Sprintf("timeout_seconds must be between 0 and %d", berth.MaxWaitChildSeconds),
			Details: map[string]any{"field": "timeout_seconds"}}
	}
	s, err := t.inTree(ctx, a.ChildID)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Duration(a.TimeoutSeconds)*time.Second)
	defer cancel()
	for !settled(s) {
		if err := t.awaitEvent(wctx, s.ID, s.LastSeq); err != nil && ctx.Err() != nil {
			return nil, berth.WrapError(berth.EUnavailable, ctx.Err(), "wait_child ended before the child settled")
		}
		if s, err = t.m.GetSession(ctx, a.ChildID); err != nil {
			return nil, err
		}
		if wctx.Err() != nil {
			break
		}
	}
	out := &berth.WaitChildResult{ChildID: s.ID, State: s.State, Badge: s.Badge, TimedOut: !settled(s)}
	reason, text := t.m.transcripts.lastTurn(ctx, s.ID)
	out.StopReason, out.Text = reason, text
	if s.State == berth.StateStopped {
		out.StopReason = string(s.StopReason)
	}
	return out, nil
}

// settled reports whether a session has nothing to do until someone acts:
// stopped, idle with an empty queue, or waiting on a decision or a login.
func settled(s *berth.Session) bool {
	switch {
	case s.State == berth.StateStopped:
		return true
	case s.State != berth.StateActive:
		return false
	case s.Badge == berth.BadgeWaiting || s.Badge == berth.BadgeNeedsAuth:
		return true
	}
	return s.CurrentTurnID == "" && s.Queue.Pending == 0
}

// awaitEvent returns once session id logs an event after seq, or after
// waitRecheck, or when ctx ends (its error).
func (t *childTools) awaitEvent(ctx context.Context, id string, after int64) error {
	sctx, cancel := context.WithTimeout(ctx, waitRecheck)
	defer cancel()
	st, err := t.m.StreamEvents(sctx, id, after)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Next(sctx); err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return nil
}

// lastTurn is the stop reason of session id's last ended turn and the
// text of its last turn that has any.
func (tr *transcripts) lastTurn(ctx context.Context, id string) (stopReason, text string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := tr.m.log.FlushSession(ctx, id); err != nil {
		tr.m.logger.Warn("flush before reading the last turn", "session_id", id, "err", err)
	}
	text, stopReason, err := tr.lastTurnText(ctx, id)
	if err != nil {
		tr.m.logger.Warn("read the last turn", "session_id", id, "err", err)
		return "", ""
	}
	return stopReason, text
}

// ListChildren lists the caller's children, every page.
func (t *childTools) ListChildren(ctx context.Context) (*berth.ChildrenResult, error) {
	out := &berth.ChildrenResult{Children: []berth.ChildInfo{}}
	f := berth.SessionFilter{Parent: t.id, Limit: 1000}
	for {
		page, err := t.m.ListSessions(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, s := range page.Sessions {
			out.Children = append(out.Children, childInfo(s))
		}
		if page.NextCursor == "" || len(page.Sessions) == 0 {
			return out, nil
		}
		f.Cursor = page.NextCursor
	}
}

// StopChild stops a session of the caller's subtree (its own subtree
// stops with it).
func (t *childTools) StopChild(ctx context.Context, a berth.ChildArgs) (*berth.ChildInfo, error) {
	if _, err := t.inTree(ctx, a.ChildID); err != nil {
		return nil, err
	}
	s, err := t.m.StopSession(ctx, a.ChildID)
	if err != nil {
		return nil, err
	}
	info := childInfo(s)
	return &info, nil
}

// childInfo is s as list_children shows it.
func childInfo(s *berth.Session) berth.ChildInfo {
	return berth.ChildInfo{ChildID: s.ID, Name: s.Name, State: s.State, Badge: s.Badge, StopReason: s.StopReason}
}

// inTree returns the session id when it lies below the caller in its tree
// (a child, a child's child, ...). Anything else — the caller itself, its
// parent, a sibling's tree, another tree, no session at all — is the same
// ENotFound, which says nothing of sessions outside the subtree.
func (t *childTools) inTree(ctx context.Context, id string) (*berth.Session, error) {
	notFound := &berth.Error{Code: berth.ENotFound, Message: fmt.Sprintf("no session %q below this session", id),
		Details: map[string]any{"field": "child_id"}}
	if id == "" || id == t.id {
		return nil, notFound
	}
	in, err := t.m.InSubtree(ctx, t.id, id)
	if berth.IsCode(err, berth.ENotFound) || (err == nil && !in) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	return t.m.GetSession(ctx, id)
}
