package session

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// scriptedHugeInit set makes the scripted agent answer initialize with
// megabytes of agent info, capabilities and auth methods.
const scriptedHugeInit = "BERTH_SCRIPTED_HUGE_INIT"

// scriptedAgent is a hand-written ACP agent for the cases the demo agent
// cannot produce: updates sent before session/new answers and after a
// prompt answers, update kinds and notifications berth does not know,
// non-JSON lines on stdout, and auth_required.
func scriptedAgent(in io.Reader, out io.Writer) int {
	w := bufio.NewWriter(out)
	send := func(format string, args ...any) {
		fmt.Fprintf(w, format+"\n", args...)
		w.Flush()
	}
	update := func(u string) {
		send(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"scripted-1","update":%s}}`, u)
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		switch m.Method {
		case "initialize":
			send("Starting scripted agent v1...") // not JSON: skipped and counted
			if os.Getenv(scriptedHugeInit) != "" {
				// Megabytes of what it says of itself.
				big := strings.Repeat("x", 1<<20)
				send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{"_meta":{"x":%q}},"agentInfo":{"name":%q},"authMethods":[{"id":"login","name":"Log in","description":%q}]}}`, m.ID, big, big, big)
				continue
			}
			send(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"id":"login","name":"Log in"}]}}`, m.ID)
		case "session/new":
			update(`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"early"}]}`)
			send(`{"jsonrpc":"2.0","method":"_auth/status_update","params":{"state":"ok"}}`)
			// The older unstable models state, offered without config options.
			send(`{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"scripted-1","models":{"currentModelId":"m1","availableModels":[{"modelId":"m1","name":"M1"},{"modelId":"m2","name":"M2"},{"modelId":"m3","name":"Offered but refused"}]}}}`, m.ID)
		case "session/set_model":
			if strings.Contains(sc.Text(), `"modelId":"m3"`) {
				send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"model m3 is down"}}`, m.ID)
				continue
			}
			send(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		case "session/prompt":
			text := ""
			if len(m.Params.Prompt) > 0 {
				text = m.Params.Prompt[0].Text
			}
			if text == "auth" {
				send(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"Authentication required"}}`, m.ID)
				continue
			}
			if text == "title" {
				update(`{"sessionUpdate":"session_info_update","title":"Fix\u001b[31m login"}`)
				send(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, m.ID)
				continue
			}
			update(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}`)
			update(`{"sessionUpdate":"hologram_update","beam":{"intensity":3}}`)
			update(`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AAAA","mimeType":"image/png"}}`)
			send(`{"jsonrpc":"2.0","id":%s,"result":{"stopReason":"end_turn"}}`, m.ID)
			update(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late"}}`)
		}
	}
	return 0
}

func TestUnknownEarlyAndLateUpdatesAreKept(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{Agent: "scripted"})
	if s.State != berth.StateActive || len(s.ACP.AuthMethods) == 0 {
		t.Fatalf("session = %+v", s)
	}
	res := e.prompt(s.ID, "hello")
	if res.StopReason != berth.TurnEndTurn || res.Text != "ok" {
		t.Fatalf("turn = %+v", res)
	}
	waitFor(t, "the late update", func() bool {
		evs := e.events(s.ID)
		last := evs[len(evs)-1]
		return last.Type == berth.EventAgentMessage && strings.Contains(string(last.Data), "late")
	})
	evs := e.events(s.ID)
	checkContiguous(t, evs)
	got := types(evs)
	want := []string{berth.EventSessionCreated, berth.EventRuntimeWarning, berth.EventSessionStarted, berth.EventCommandsUpdate, berth.EventACPUnknown,
		berth.EventTurnStarted, berth.EventAgentMessage, berth.EventACPUnknown, berth.EventAgentMessage, berth.EventTurnEnded,
		berth.EventAgentMessage}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("log = %v\nwant  %v", got, want)
	}
	if !strings.Contains(string(evs[4].Data), "_auth/status_update") || !strings.Contains(string(evs[7].Data), "hologram_update") {
		t.Fatalf("unknown events lost their payload: %s / %s", evs[4].Data, evs[7].Data)
	}
	if !strings.Contains(string(evs[8].Data), "image/png") {
		t.Fatalf("non-text chunk lost its content: %s", evs[8].Data)
	}
	if evs[10].TurnID != "" {
		t.Fatalf("an update after the answer was tagged with turn %q", evs[10].TurnID)
	}
	if w := ofType(evs, berth.EventRuntimeWarning); len(w) != 1 || !strings.Contains(string(w[0].Data), "not JSON") {
		t.Fatalf("non-JSON stdout warning = %v", w)
	}
}

func TestAuthRequiredEndsTheTurnAndShowsNeedsAuth(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{Agent: "scripted"})
	res := e.prompt(s.ID, "auth")
	if res.StopReason != berth.TurnError || res.Error == nil || res.Error.Code != "auth_required" {
		t.Fatalf("turn = %+v", res)
	}
	got, _ := e.m.GetSession(context.Background(), s.ID)
	if got.State != berth.StateActive || got.Badge != berth.BadgeNeedsAuth {
		t.Fatalf("session = %s/%s, want active/needs_auth", got.State, got.Badge)
	}
	e.prompt(s.ID, "hello")
	got, _ = e.m.GetSession(context.Background(), s.ID)
	if got.Badge != berth.BadgeIdle {
		t.Fatalf("badge after a good turn = %s", got.Badge)
	}
}

// TestAHugeInitializeAnswerIsNotKept: an agent's megabytes of agent info,
// capabilities and auth methods are left out of the Session (which every
// list returns), and the session still starts.
func TestAHugeInitializeAnswerIsNotKept(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{Agent: "scripted-huge"})
	if s.State != berth.StateActive {
		t.Fatalf("session = %s %+v", s.State, s.Failure)
	}
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if len(b) > 64<<10 { // live keeps at most that of each part
		t.Fatalf("the Session is %d bytes", len(b))
	}
}
