package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/mcptest"
)

// Secrets the MCP servers of these tests are given: never shown back,
// never in the daemon's log nor the session's.
const (
	mcpEnvSecret    = "env-secret-7f3a"
	mcpHeaderSecret = "header-secret-91cd"
)

// stdioMCPInWorkspace copies this test binary into a new workspace, where
// every sandbox sees it, and returns the workspace and a stdio server
// running the copy as the test MCP server.
func stdioMCPInWorkspace(t *testing.T) (string, map[string]any) {
	t.Helper()
	ws := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(ws, "mcp-server")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return ws, map[string]any{"name": "tools", "command": dst,
		"env": map[string]string{mcptest.EnvVar: "stdio", "MCP_MARK": "mark-42", "MCP_TOKEN": mcpEnvSecret}}
}

// mcpCallOf returns the title and last status of the one tool call of a
// turn, and the turn's agent messages.
func mcpCallOf(evs []berth.Event, turnID string) (title, status, text string) {
	for _, ev := range evs {
		if ev.TurnID != turnID {
			continue
		}
		var d struct {
			Title  string `json:"title"`
			Status string `json:"status"`
			Text   string `json:"text"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		switch ev.Type {
		case berth.EventToolCall:
			title, status = d.Title, d.Status
		case berth.EventToolCallUpdate:
			if d.Status != "" {
				status = d.Status
			}
		case berth.EventAgentMessage:
			text += d.Text
		}
	}
	return title, status, text
}

// mcpCall runs an `mcp SERVER TOOL JSON` turn and checks the session log:
// one tool call titled "mcp SERVER TOOL" whose last status is wantStatus,
// then the turn's message, holding wantText.
func mcpCall(t *testing.T, s *server, id, text, wantStatus, wantText string) {
	t.Helper()
	var r berth.TurnResult
	if st, err := s.api("POST", "/v1/sessions/"+id+"/prompts?wait=true", map[string]string{"text": text}, &r); st != 200 {
		t.Fatalf("%q = %d %v", text, st, err)
	}
	// The log may trail the answer: wait for the turn's end in it.
	evs := s.waitLog(t, id, "the turn's end", func(evs []berth.Event) bool {
		_, ended := turnEndedOf(evs, r.TurnID)
		return ended
	})
	f := strings.Fields(text)
	title, status, msg := mcpCallOf(evs, r.TurnID)
	if title != "mcp "+f[1]+" "+f[2] || status != wantStatus || !strings.Contains(msg, wantText) || r.Text != msg {
		t.Fatalf("%q: tool call %q %s, message %q (turn text %q); want %s, %q", text, title, status, msg, r.Text, wantStatus, wantText)
	}
}

// A real daemon gives a session's MCP servers to its agent on the host
// sandbox and under bwrap: the demo agent starts the stdio server inside
// its sandbox (its child, with the server's env) and, on the host, calls
// an http server too; the session log shows each tool_call, its
// completion and the tool's text. The servers come back after stop and
// resume. GET shows them with env and header values redacted, and no
// secret reaches the daemon's log or the session's.
func TestUserMCPServersEndToEnd(t *testing.T) {
	s := startServer(t, t.TempDir())
	web := httptest.NewServer(mcptest.HTTPHandler())
	defer web.Close()
	for _, provider := range []string{berth.SandboxHost, berth.SandboxBwrap} {
		t.Run(provider, func(t *testing.T) {
			s.needSandbox(t, provider)
			ws, tools := stdioMCPInWorkspace(t)
			servers := []map[string]any{tools}
			if provider == berth.SandboxHost {
				// Under bwrap the test's loopback server is out of reach.
				servers = append(servers, map[string]any{"name": "web", "type": "http", "url": web.URL,
					"headers": map[string]string{"Authorization": "Bearer " + mcpHeaderSecret}})
			}
			var sess berth.Session
			if st, err := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": provider,
				"workspace": ws, "mcp_servers": servers}, &sess); st != 201 || sess.State != berth.StateActive {
				t.Fatalf("create = %d %v %+v (%v)", st, err, sess.State, sess.Failure)
			}
			if sess.Sandbox.Provider != provider {
				t.Fatalf("the session runs in sandbox %s, want %s", sess.Sandbox.Provider, provider)
			}
			path := "/v1/sessions/" + sess.ID
			call := func(text, wantStatus, wantText string) {
				t.Helper()
				mcpCall(t, s, sess.ID, text, wantStatus, wantText)
			}
			both := func() {
				call(`mcp tools echo {"text":"hi"}`, "completed", "echo: hi")
				call(`mcp tools env {"name":"MCP_MARK"}`, "completed", "mark-42")
				if provider == berth.SandboxHost {
					call(`mcp web echo {"text":"over http"}`, "completed", "echo: over http")
				}
			}
			both()
			call(`mcp tools fail {}`, "failed", "mcp error: "+mcptest.FailText)

			var shown map[string]any
			s.api("GET", path, nil, &shown)
			b, _ := json.Marshal(shown["mcp_servers"])
			if !strings.Contains(string(b), `"MCP_TOKEN":"[redacted]"`) || strings.Contains(string(b), mcpEnvSecret) {
				t.Fatalf("GET shows mcp_servers %s", b)
			}

			if st, _ := s.api("POST", path+"/stop", nil, nil); st != 200 {
				t.Fatalf("stop = %d", st)
			}
			if st, _ := s.api("POST", path+"/resume", nil, &sess); st != 200 || sess.State != berth.StateActive {
				t.Fatalf("resume = %d %+v", st, sess)
			}
			both()
			call(`mcp nowhere echo {}`, "failed", `mcp error: no MCP server named "nowhere"`)

			logged, _ := json.Marshal(s.allEvents(t, sess.ID))
			for _, secret := range []string{mcpEnvSecret, mcpHeaderSecret} {
				if strings.Contains(string(logged), secret) {
					t.Fatalf("the secret %q is in the session log", secret)
				}
			}
		})
	}
	// The daemon's log is read once it has exited and written it all.
	s.stop()
	for _, secret := range []string{mcpEnvSecret, mcpHeaderSecret} {
		if strings.Contains(s.log.String(), secret) {
			t.Fatalf("the secret %q is in the daemon's log", secret)
		}
	}
}

// A session's MCP servers outlive its daemon: after a SIGKILL the next
// daemon reattaches the agent, which still has them, and a stop and resume
// under that daemon gives them again, whole, from the store.
func TestUserMCPServersSurviveADaemonRestart(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	ws, tools := stdioMCPInWorkspace(t)
	var sess berth.Session
	if st, err := s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host",
		"workspace": ws, "mcp_servers": []map[string]any{tools}}, &sess); st != 201 || sess.State != berth.StateActive {
		t.Fatalf("create = %d %v %+v", st, err, sess)
	}
	mcpCall(t, s, sess.ID, `mcp tools echo {"text":"before"}`, "completed", "echo: before")
	// berth show names the servers, never their secrets.
	show := exec.Command(bin, "show", sess.ID, "--addr", s.addr)
	show.Env = cleanEnv(home)
	if out, err := show.CombinedOutput(); err != nil || !strings.Contains(string(out), "tools (stdio)") || strings.Contains(string(out), mcpEnvSecret) {
		t.Fatalf("berth show: %v\n%s", err, out)
	}
	s.kill9()

	s2 := startServer(t, home)
	mcpCall(t, s2, sess.ID, `mcp tools echo {"text":"reattached"}`, "completed", "echo: reattached")
	path := "/v1/sessions/" + sess.ID
	if st, _ := s2.api("POST", path+"/stop", nil, nil); st != 200 {
		t.Fatalf("stop = %d", st)
	}
	if st, _ := s2.api("POST", path+"/resume", nil, &sess); st != 200 || sess.State != berth.StateActive {
		t.Fatalf("resume = %d %+v", st, sess)
	}
	// The secret env reached the server again: it came from the store.
	mcpCall(t, s2, sess.ID, `mcp tools env {"name":"MCP_TOKEN"}`, "completed", mcpEnvSecret)
}

// Bad mcp_servers are answered 400 invalid_argument naming the field, and
// nothing is created: duplicate names, an unknown field, a stdio server
// without a command, a transport the agent does not offer (the demo agent
// has no SSE), and an http server in a sandbox without network.
func TestUserMCPServersRefused(t *testing.T) {
	s := startServer(t, t.TempDir())
	cases := []struct {
		name  string
		body  map[string]any
		field string
		want  string
	}{
		{"duplicate", map[string]any{"mcp_servers": []map[string]any{{"name": "a", "command": "/bin/true"}, {"name": "a", "command": "/bin/true"}}},
			"mcp_servers[1].name", "unique"},
		{"no command", map[string]any{"mcp_servers": []map[string]any{{"name": "a"}}}, "mcp_servers[0].command", "command is required"},
		{"unknown field", map[string]any{"mcp_servers": []map[string]any{{"name": "a", "cmd": "/bin/true"}}}, "", "cmd"},
		{"sse", map[string]any{"sandbox": "host", "mcp_servers": []map[string]any{{"name": "ev", "type": "sse", "url": "http://127.0.0.1:9/sse"}}},
			"mcp_servers[0].type", "does not offer MCP over sse"},
	}
	if slices.Contains(s.health(t).Sandboxes, berth.SandboxBwrap) {
		cases = append(cases, struct {
			name  string
			body  map[string]any
			field string
			want  string
		}{"http without network", map[string]any{"sandbox": "bwrap", "mcp_servers": []map[string]any{{"name": "w", "type": "http", "url": "https://mcp.example/"}}},
			"mcp_servers[0].url", "no network"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.body["agent"] = "demo"
			var e errorBody
			st, _ := s.api("POST", "/v1/sessions", c.body, &e)
			if st != 400 || e.Error.Code != "invalid_argument" || !strings.Contains(e.Error.Message, c.want) ||
				(c.field != "" && e.Error.Details["field"] != c.field) {
				t.Fatalf("create = %d %+v, want 400 naming %s (%q)", st, e.Error, c.field, c.want)
			}
		})
	}
	var page berth.SessionPage
	s.api("GET", "/v1/sessions", nil, &page)
	if len(page.Sessions) != 0 {
		t.Fatalf("sessions left: %+v", page.Sessions)
	}
}

// berth run --mcp-config gives the session the file's servers; a file that
// is not a list of servers is a usage error.
func TestRunWithMCPConfig(t *testing.T) {
	home := t.TempDir()
	ws, tools := stdioMCPInWorkspace(t)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	b, _ := json.Marshal([]map[string]any{tools})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--sandbox", "host", "--workspace", ws, "--mcp-config", cfg, `mcp tools echo {"text":"from the cli"}`)
	cmd.Env = cleanEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "echo: from the cli") {
		t.Fatalf("berth run --mcp-config: %v\nstdout %s\nstderr %s", err, stdout.String(), stderr.String())
	}
	assertNoProcessUnder(t, home)

	if err := os.WriteFile(cfg, []byte(`{"tools": {"command": "/bin/true"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := exec.Command(bin, "run", "--mcp-config", cfg, "echo x")
	bad.Env = cleanEnv(home)
	if out, err := bad.CombinedOutput(); exitCodeOf(err) != 2 || !strings.Contains(string(out), "bad --mcp-config") {
		t.Fatalf("a bad file: exit %d, %s", exitCodeOf(err), out)
	}
}

// berth create --mcp-config creates the session with the file's servers:
// the agent calls them, and the printed session names them.
func TestCreateWithMCPConfig(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	ws, tools := stdioMCPInWorkspace(t)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	b, _ := json.Marshal([]map[string]any{tools})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "create", "--addr", s.addr, "--sandbox", "host", "--workspace", ws, "--mcp-config", cfg)
	cmd.Env = cleanEnv(home)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tools (stdio)") || strings.Contains(string(out), mcpEnvSecret) {
		t.Fatalf("berth create --mcp-config: %v\n%s", err, out)
	}
	var page berth.SessionPage
	s.api("GET", "/v1/sessions", nil, &page)
	if len(page.Sessions) != 1 {
		t.Fatalf("sessions: %+v", page.Sessions)
	}
	mcpCall(t, s, page.Sessions[0].ID, `mcp tools env {"name":"MCP_MARK"}`, "completed", "mark-42")
}
