package live

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// An agent the kernel killed at the sandbox's memory limit is reported as
// such: a sandbox failure saying out of memory, not a bare SIGKILL.
func TestClassifyOOMExit(t *testing.T) {
	reason, f := classifyExit(berth.ExitStatus{Code: -1, Signal: "SIGKILL", OOMKills: 1}, []string{"last words"}, false)
	if reason != berth.StopAgentCrashed || f == nil || f.Kind != berth.FailSandbox || !strings.Contains(f.Message, "out of memory") || !strings.Contains(f.Message, "last words") {
		t.Errorf("OOM exit: %s, %+v", reason, f)
	}
	// A SIGKILL with no OOM kill is a plain crash.
	if _, f := classifyExit(berth.ExitStatus{Code: -1, Signal: "SIGKILL"}, nil, false); f == nil || f.Kind != berth.FailProcessExit {
		t.Errorf("plain SIGKILL: %+v", f)
	}
}

// A shim hands the agent initialize for every start, and session/new on
// its answer only for a new conversation, with the workspace and MCP
// servers the session's own session/new would send (berth's tools last);
// a resumed or forked one's method depends on that answer: none.
func TestHandshakeLinesHandAheadOnlyANewConversation(t *testing.T) {
	s := &berth.Session{ID: "ses_1", Workspace: "/w", MCPServers: []berth.MCPServer{{Name: "files", Command: "/bin/files"}}}
	tools := &acp.McpServer{Name: "berth", Command: "/bin/berth", Args: []string{"mcp"}}
	for _, tc := range []struct {
		name string
		cfg  Config
		new  bool
	}{
		{"new", Config{}, true},
		{"resumed, never opened", Config{Resumed: true}, true},
		{"resumed", Config{Resumed: true, ResumeFrom: "acp-1"}, false},
		{"forked", Config{Fork: &Fork{Agent: "demo", ACPSession: "acp-1", Turns: 1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Session, tc.cfg.Logger = s, slog.New(slog.DiscardHandler)
			ls := New(&Host{Version: "test"}, tc.cfg)
			ls.conv.tools = tools
			initialize, sessionNew := ls.handshakeLines()
			if kind, id, method := acp.Classify(initialize); kind != acp.KindRequest || string(id) != "1" || method != acp.MethodInitialize {
				t.Errorf("initialize line %q", initialize)
			}
			if !tc.new {
				if sessionNew != nil {
					t.Errorf("session/new handed ahead: %q", sessionNew)
				}
				return
			}
			var req struct {
				ID     int                   `json:"id"`
				Method string                `json:"method"`
				Params acp.NewSessionRequest `json:"params"`
			}
			if err := json.Unmarshal(sessionNew, &req); err != nil || req.ID != 2 || req.Method != acp.MethodSessionNew {
				t.Fatalf("session/new line %q: %v", sessionNew, err)
			}
			if p := req.Params; p.Cwd != "/w" || len(p.McpServers) != 2 || p.McpServers[0].Name != "files" || p.McpServers[1].Name != "berth" {
				t.Errorf("session/new params %+v", p)
			}
		})
	}
}
