package session

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// selfDecidingModes is what the self-deciding stand-in offers: like Claude
// Code's adapter, it opens every conversation, new or loaded, in auto, and
// offers its modes as a config option of category mode too.
const selfDecidingModes = `"modes":{"currentModeId":"auto","availableModes":[{"id":"auto","name":"Auto"},{"id":"default","name":"Ask"},` +
	`{"id":"acceptEdits","name":"Accept edits"},{"id":"bypassPermissions","name":"Bypass"}]}`

// selfDecidingOptions is the stand-in's config options with mode current.
func selfDecidingOptions(mode string) string {
	return fmt.Sprintf(`"configOptions":[{"id":"mode","name":"Mode","type":"select","category":"mode","currentValue":%q,`+
		`"options":[{"value":"auto","name":"Auto"},{"value":"default","name":"Ask"},{"value":"acceptEdits","name":"Accept edits"},`+
		`{"value":"bypassPermissions","name":"Bypass"}]}]`, mode)
}

// selfDecidingAgent is an ACP agent whose modes auto, acceptEdits and
// bypassPermissions would answer permissions by themselves. Prompts:
// "mode" answers "mode: ID"; "ask KIND" asks a permission for a tool call
// of KIND and answers "permission: OPTION" (or "permission: cancelled").
func selfDecidingAgent(in io.Reader, out io.Writer) int {
	w := bufio.NewWriter(out)
	send := func(format string, args ...any) {
		fmt.Fprintf(w, format+"\n", args...)
		w.Flush()
	}
	say := func(sid, text string) {
		send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, sid, text)
	}
	mode, sid := "auto", "sd-1"
	var asking json.RawMessage // the id of the prompt waiting for a permission
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				ModeID    string `json:"modeId"`
				Value     string `json:"value"`
				Prompt    []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
			Result struct {
				Outcome struct {
					Outcome  string `json:"outcome"`
					OptionID string `json:"optionId"`
				} `json:"outcome"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch m.Method {
		case "":
			// The answer to the permission asked.
			if asking != nil {
				answer := m.Result.Outcome.OptionID
				if m.Result.Outcome.Outcome != "selected" {
					answer = "cancelled"
				}
				say(sid, "permission: "+answer)
				send(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, asking)
				asking = nil
			}
		case "initialize":
			send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`, m.ID)
		case "session/new", "session/load":
			if m.Params.SessionID != "" {
				sid = m.Params.SessionID
			}
			mode = "auto"
			send(`{"jsonrpc":"2.0","id":%s,"result":{"sessionId":%q,%s,%s}}`, m.ID, sid, selfDecidingModes, selfDecidingOptions(mode))
		case "session/set_mode":
			mode = m.Params.ModeID
			send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		case "session/set_config_option":
			mode = m.Params.Value
			send(`{"jsonrpc":"2.0","id":%s,"result":{%s}}`, m.ID, selfDecidingOptions(mode))
		case "session/prompt":
			text := ""
			if len(m.Params.Prompt) > 0 {
				text = m.Params.Prompt[0].Text
			}
			if kind, ok := strings.CutPrefix(text, "ask "); ok {
				asking = m.ID
				send(`{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":%q,`+
					`"toolCall":{"toolCallId":"tc-1","title":"a %s","kind":%q},"options":[{"optionId":"allow","name":"Allow","kind":"allow_once"},`+
					`{"optionId":"reject","name":"Reject","kind":"reject_once"}]}}`, sid, kind, kind)
				continue
			}
			say(sid, "mode: "+mode)
			send(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, m.ID)
		default:
			if m.ID != nil {
				send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`, m.ID)
			}
		}
	}
	return 0
}

// modesOf is the session's modes as GET shows them.
func (e *env) modesOf(id string) berth.ACPModes {
	e.t.Helper()
	s, err := e.m.GetSession(context.Background(), id)
	if err != nil || s.ACP.Modes == nil {
		e.t.Fatalf("session %s: %+v, %v", id, s, err)
	}
	m := *s.ACP.Modes
	// What the agent sent, whole: nothing these tests look at.
	m.Raw = nil
	return m
}

// stopAndResume stops a session and resumes it.
func (e *env) stopAndResume(id string) {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.m.StopSession(ctx, id); err != nil {
		e.t.Fatal(err)
	}
	if s, err := e.m.ResumeSession(ctx, id); err != nil || s.State != berth.StateActive {
		e.t.Fatalf("resume: %+v, %v", s, err)
	}
}

// An agent that opens in a mode answering permissions by itself is put in
// its asking mode at start and again after a resume, and the Session says
// berth did it.
func TestASelfDecidingModeIsLeftForTheAskingOne(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{Agent: "self-deciding"})
	want := berth.ACPModes{Current: "default", SetBy: "berth", ForcedFrom: "auto"}
	if m := e.modesOf(s.ID); m.Current != want.Current || m.SetBy != want.SetBy || m.ForcedFrom != want.ForcedFrom {
		t.Fatalf("modes after the start = %+v", m)
	}
	if res := e.prompt(s.ID, "mode"); res.Text != "mode: default" {
		t.Fatalf("the agent's mode after the start: %q", res.Text)
	}
	// Its config option of category mode says the same.
	if got, _ := e.m.GetSession(context.Background(), s.ID); len(got.ACP.ConfigOptions) != 1 || got.ACP.ConfigOptions[0].CurrentString() != "default" {
		t.Fatalf("config options after the start = %+v", got.ACP.ConfigOptions)
	}
	type modeUpdate struct {
		Current    string `json:"current"`
		Source     string `json:"source"`
		ForcedFrom string `json:"forced_from"`
	}
	updates := eventData[modeUpdate](e, s.ID, berth.EventModeUpdate)
	if len(updates) != 1 || updates[0] != (modeUpdate{Current: "default", Source: "berth", ForcedFrom: "auto"}) {
		t.Fatalf("mode_update events = %+v", updates)
	}
	// The agent reopens the conversation in auto again.
	e.stopAndResume(s.ID)
	if res := e.prompt(s.ID, "mode"); res.Text != "mode: default" {
		t.Fatalf("the agent's mode after the resume: %q", res.Text)
	}
	if m := e.modesOf(s.ID); m.Current != want.Current || m.SetBy != want.SetBy || m.ForcedFrom != want.ForcedFrom {
		t.Fatalf("modes after the resume = %+v", m)
	}
}

// approve-all asks nothing: the agent keeps its own mode.
func TestApproveAllLeavesTheAgentsOwnMode(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{Agent: "self-deciding", PermissionMode: berth.PermApproveAll})
	if m := e.modesOf(s.ID); m.Current != "auto" || m.SetBy != "" || m.ForcedFrom != "" {
		t.Fatalf("modes = %+v", m)
	}
	if res := e.prompt(s.ID, "mode"); res.Text != "mode: auto" {
		t.Fatalf("the agent's mode: %q", res.Text)
	}
	e.stopAndResume(s.ID)
	if res := e.prompt(s.ID, "mode"); res.Text != "mode: auto" {
		t.Fatalf("the agent's mode after the resume: %q", res.Text)
	}
}

// A mode the user picks is theirs, self-deciding or not, across resumes.
func TestAUserPickedModeIsKept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "self-deciding"})
	got, err := e.m.PatchSession(ctx, s.ID, berth.SessionPatch{Mode: "acceptEdits"})
	if err != nil || got.ACP.Modes.Current != "acceptEdits" || got.ACP.Modes.SetBy != "user" || got.ACP.Modes.ForcedFrom != "" {
		t.Fatalf("patch: %+v, %v", got, err)
	}
	e.stopAndResume(s.ID)
	if res := e.prompt(s.ID, "mode"); res.Text != "mode: acceptEdits" {
		t.Fatalf("the agent's mode after the resume: %q", res.Text)
	}
	if m := e.modesOf(s.ID); m.Current != "acceptEdits" || m.SetBy != "user" {
		t.Fatalf("modes after the resume = %+v", m)
	}
}

// approve-reads allows a read by policy, and asks for anything else:
// the stand-in asks with the kinds the demo agent cannot.
func TestApproveReadsAllowsAReadAndAsksForAnExecute(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "self-deciding"})
	if res := e.prompt(s.ID, "ask read"); res.Text != "permission: allow" {
		t.Fatalf("a read: %q", res.Text)
	}
	if rs := e.resolutions(s.ID); len(rs) != 1 || rs[0].DecidedBy != berth.DecidedByPolicy {
		t.Fatalf("the read's resolution: %+v", rs)
	}
	r := e.promptOK(s.ID, "ask execute", "")
	p := e.pendingPermission(s.ID)
	if _, err := e.m.DecidePermission(ctx, s.ID, p.ID, berth.PermissionDecision{Decision: berth.DecisionRejectOnce}); err != nil {
		t.Fatal(err)
	}
	if res := e.waitResult(s.ID, r.TurnID); res.Text != "permission: reject" {
		t.Fatalf("an execute: %q", res.Text)
	}
}

// A clear's new conversation opens in auto again: it is left too.
func TestAClearedConversationIsLeftInTheAskingMode(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{Agent: "self-deciding"})
	got, err := e.m.ClearSession(context.Background(), s.ID, false)
	if err != nil || got.ACP.Modes == nil || got.ACP.Modes.Current != "default" || got.ACP.Modes.SetBy != "berth" {
		t.Fatalf("clear: %+v, %v", got, err)
	}
	if res := e.prompt(s.ID, "mode"); res.Text != "mode: default" {
		t.Fatalf("the agent's mode after the clear: %q", res.Text)
	}
}
