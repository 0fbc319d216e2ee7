package demoagent

import (
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/berth-sh/berth/internal/mcptest"
)

// mcpSession does initialize + session/new with the given MCP servers.
func (h *harness) mcpSession(servers ...acp.McpServer) acp.SessionId {
	h.t.Helper()
	h.initialize()
	resp, err := h.conn.NewSession(ctxT(h.t), acp.NewSessionRequest{Cwd: h.root, McpServers: servers})
	if err != nil {
		h.t.Fatalf("session/new: %v", err)
	}
	return resp.SessionId
}

// stdioServer is the test MCP server as a stdio server: this test binary
// in its helper mode, with env.
func stdioServer(t *testing.T, name string, env ...acp.EnvVariable) acp.McpServer {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, acp.EnvVariable{Name: mcptest.EnvVar, Value: "stdio"})
	return acp.McpServer{Stdio: &acp.McpServerStdio{Name: name, Command: self, Args: []string{}, Env: env}}
}

// httpServer is the test MCP server over streamable HTTP, as an http server.
func httpServer(t *testing.T, name string, headers ...acp.HttpHeader) acp.McpServer {
	srv := httptest.NewServer(mcptest.HTTPHandler())
	t.Cleanup(srv.Close)
	return acp.McpServer{Http: &acp.McpServerHttpInline{Type: "http", Name: name, Url: srv.URL, Headers: headers}}
}

// mcpTurn runs one `mcp` prompt and returns the turn's message and its
// tool call's kind and final status.
func (h *harness) mcpTurn(sid acp.SessionId, text string) (string, acp.ToolKind, acp.ToolCallStatus) {
	h.t.Helper()
	before := len(h.client.sessionUpdates(sid))
	h.mustPrompt(sid, text, acp.StopReasonEndTurn)
	us := h.client.sessionUpdates(sid)[before:]
	var msg strings.Builder
	for _, u := range us {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			msg.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	}
	kinds, final := toolCalls(us)
	if len(kinds) != 1 {
		h.t.Fatalf("%q made %d tool calls, want 1", text, len(kinds))
	}
	return msg.String(), kinds[0], final[0]
}

// The demo agent offers MCP over stdio and HTTP, not SSE; --no-mcp-http
// takes HTTP away.
func TestMCPCapabilities(t *testing.T) {
	caps := start(t).initialize().AgentCapabilities.McpCapabilities
	if !caps.Http || caps.Sse {
		t.Fatalf("mcpCapabilities = %+v, want http only", caps)
	}
	if caps := start(t, "--no-mcp-http").initialize().AgentCapabilities.McpCapabilities; caps.Http || caps.Sse {
		t.Fatalf("--no-mcp-http: mcpCapabilities = %+v, want none", caps)
	}
}

// `mcp` calls a tool on a stdio server the agent starts with the server's
// env, and reports a tool's error result as "mcp error: …", the call
// failed.
func TestMCPStdio(t *testing.T) {
	h := start(t)
	sid := h.mcpSession(stdioServer(t, "tools", acp.EnvVariable{Name: "MCP_SECRET", Value: "s3cret"}))
	if msg, kind, st := h.mcpTurn(sid, `mcp tools echo {"text":"hi there"}`); msg != "echo: hi there" || kind != acp.ToolKindFetch || st != acp.ToolCallStatusCompleted {
		t.Fatalf("echo: %q %s %s; stderr:\n%s", msg, kind, st, h.stderr.String())
	}
	if msg, _, _ := h.mcpTurn(sid, `mcp tools env {"name":"MCP_SECRET"}`); msg != "s3cret" {
		t.Fatalf("the server's env: %q", msg)
	}
	if msg, _, st := h.mcpTurn(sid, `mcp tools fail {}`); msg != "mcp error: "+mcptest.FailText || st != acp.ToolCallStatusFailed {
		t.Fatalf("fail: %q %s", msg, st)
	}
}

// `mcp` calls a tool on an http server with the server's headers.
func TestMCPHTTP(t *testing.T) {
	h := start(t)
	sid := h.mcpSession(httpServer(t, "web", acp.HttpHeader{Name: "Authorization", Value: "Bearer tok"}))
	if msg, _, st := h.mcpTurn(sid, `mcp web echo {"text":"over http"}`); msg != "echo: over http" || st != acp.ToolCallStatusCompleted {
		t.Fatalf("echo: %q %s; stderr:\n%s", msg, st, h.stderr.String())
	}
	if msg, _, _ := h.mcpTurn(sid, `mcp web header {"name":"Authorization"}`); msg != "Bearer tok" {
		t.Fatalf("the header: %q", msg)
	}
}

// An unknown server, a server that cannot be reached or started, and an
// unknown tool each fail the call with a clear "mcp error: …"; malformed
// arguments get the usage.
func TestMCPErrors(t *testing.T) {
	h := start(t)
	dead := httptest.NewServer(nil)
	deadURL := dead.URL
	dead.Close()
	sid := h.mcpSession(stdioServer(t, "tools"),
		acp.McpServer{Stdio: &acp.McpServerStdio{Name: "missing", Command: "/nonexistent/mcp-server", Args: []string{}, Env: []acp.EnvVariable{}}},
		acp.McpServer{Http: &acp.McpServerHttpInline{Type: "http", Name: "down", Url: deadURL, Headers: []acp.HttpHeader{}}})
	for _, c := range []struct{ text, want string }{
		{`mcp nope echo {}`, `mcp error: no MCP server named "nope" in this session (it has: tools, missing, down)`},
		{`mcp missing echo {}`, "mcp error: connect to missing: "},
		{`mcp down echo {}`, "mcp error: connect to down: "},
		{`mcp tools no_such_tool {}`, "mcp error: "},
	} {
		msg, _, st := h.mcpTurn(sid, c.text)
		if !strings.HasPrefix(msg, c.want) || st != acp.ToolCallStatusFailed {
			t.Errorf("%s: %q %s, want %q…, failed", c.text, msg, st, c.want)
		}
	}
	h.mustPrompt(sid, "mcp tools echo [1,2]", acp.StopReasonEndTurn)
	if got := h.messages(sid); !strings.HasSuffix(got, "usage: mcp SERVER TOOL JSON (the arguments are a JSON object)") {
		t.Fatalf("bad arguments: %q", got)
	}
}

// session/load gives the session the servers of the load request.
func TestMCPServersOfLoad(t *testing.T) {
	h := start(t, "--state-dir", t.TempDir())
	sid := h.mcpSession([]acp.McpServer{}...)
	load := acp.LoadSessionRequest{SessionId: sid, Cwd: h.root, McpServers: []acp.McpServer{stdioServer(t, "later")}}
	if _, err := h.conn.LoadSession(ctxT(t), load); err != nil {
		t.Fatal(err)
	}
	if msg, _, _ := h.mcpTurn(sid, `mcp later echo {"text":"loaded"}`); msg != "echo: loaded" {
		t.Fatalf("after load: %q", msg)
	}
}

// session/cancel during a long tool call ends the turn cancelled at once,
// the call failed, and the stdio server ends with it (goleak checks that
// nothing waits on it).
func TestMCPCallCancelled(t *testing.T) {
	h := start(t)
	sid := h.mcpSession(stdioServer(t, "tools"))
	var reason acp.StopReason
	var perr error
	wait := h.async(func() { reason, perr = h.prompt(ctxT(t), sid, `mcp tools sleep {"ms":60000}`) })
	waitFor(t, "the call in progress", func() bool {
		_, final := toolCalls(h.client.sessionUpdates(sid))
		return len(final) == 1 && final[0] == acp.ToolCallStatusInProgress
	})
	if err := h.conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	wait()
	if perr != nil || reason != acp.StopReasonCancelled {
		t.Fatalf("prompt = %q, %v", reason, perr)
	}
	if _, final := toolCalls(h.client.sessionUpdates(sid)); final[0] != acp.ToolCallStatusFailed {
		t.Fatalf("the cancelled call ended %s", final[0])
	}
}
