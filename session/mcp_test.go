package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/mcptest"
	"github.com/berth-sh/berth/sandbox/bwrap"
	"github.com/berth-sh/berth/sandbox/host"
)

// testMCPServers are the test MCP server as a stdio server (this test
// binary in its helper mode, with a secret in its env) and as an http
// server (with a secret header).
func testMCPServers(t *testing.T) []berth.MCPServer {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(mcptest.HTTPHandler())
	t.Cleanup(web.Close)
	return []berth.MCPServer{
		{Name: "tools", Command: self, Env: map[string]string{mcptest.EnvVar: "stdio", "MCP_SECRET": "stdio-secret"}},
		{Name: "web", Type: berth.MCPHTTP, URL: web.URL, Headers: map[string]string{"Authorization": "Bearer http-secret"}},
	}
}

// mcpTurn runs text and checks its turn made one tool call, titled
// "mcp SERVER TOOL", whose last status is status; it returns the text.
func (e *env) mcpTurn(id, text, status string) string {
	e.t.Helper()
	r := e.prompt(id, text)
	var call, last map[string]any
	for _, ev := range e.events(id) {
		if ev.TurnID != r.TurnID {
			continue
		}
		switch ev.Type {
		case berth.EventToolCall:
			_ = json.Unmarshal(ev.Data, &call)
		case berth.EventToolCallUpdate:
			var u map[string]any
			if json.Unmarshal(ev.Data, &u) == nil && u["status"] != nil {
				last = u
			}
		}
	}
	f := strings.Fields(text)
	if call == nil || call["title"] != "mcp "+f[1]+" "+f[2] || last == nil || last["status"] != status {
		e.t.Fatalf("%q: tool call %v, last update %v; want title %q ending %s", text, call, last, "mcp "+f[1]+" "+f[2], status)
	}
	return r.Text
}

// A session's MCP servers reach its agent in session/new: the demo agent
// calls tools on a stdio server it starts (with the server's env) and on an
// http server (with its headers), and the log shows the calls and results.
// They are given again on resume, through session/load or, for an agent
// without it, session/new.
func TestMCPServersReachTheAgentAndSurviveResume(t *testing.T) {
	for _, agent := range []string{"demo", "demo-noload"} {
		t.Run(agent, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			s := e.create(berth.CreateRequest{Agent: agent, MCPServers: testMCPServers(t)})
			if s.State != berth.StateActive {
				t.Fatalf("create: %+v", s)
			}
			check := func(when string) {
				if got := e.mcpTurn(s.ID, `mcp tools echo {"text":"hello"}`, "completed"); got != "echo: hello" {
					t.Fatalf("%s: stdio echo = %q", when, got)
				}
				if got := e.mcpTurn(s.ID, `mcp tools env {"name":"MCP_SECRET"}`, "completed"); got != "stdio-secret" {
					t.Fatalf("%s: stdio env = %q", when, got)
				}
				if got := e.mcpTurn(s.ID, `mcp web header {"name":"Authorization"}`, "completed"); got != "Bearer http-secret" {
					t.Fatalf("%s: http header = %q", when, got)
				}
				if got := e.mcpTurn(s.ID, `mcp web fail {}`, "failed"); got != "mcp error: "+mcptest.FailText {
					t.Fatalf("%s: error result = %q", when, got)
				}
			}
			check("after create")
			if _, err := e.m.StopSession(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
			// Without session/load, the first prompt after resume carries
			// the transcript.
			e.prompt(s.ID, "echo back")
			check("after resume")
			if got := e.mcpTurn(s.ID, `mcp other echo {}`, "failed"); !strings.Contains(got, `no MCP server named "other" in this session (it has: tools, web)`) {
				t.Fatalf("unknown server: %q", got)
			}
		})
	}
}

// The session keeps its servers with their secrets (the agent needs them
// on resume) and shows them redacted.
func TestMCPServersShownRedacted(t *testing.T) {
	e := newEnv(t)
	s := e.create(berth.CreateRequest{MCPServers: testMCPServers(t)})
	got, err := e.m.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "stdio-secret") || strings.Contains(string(b), "http-secret") ||
		!strings.Contains(string(b), `"MCP_SECRET":"[redacted]"`) || !strings.Contains(string(b), `"Authorization":"[redacted]"`) {
		t.Fatalf("session JSON: %s", b)
	}
	stored, err := e.store.GetSession(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if srv, ok := stored.MCPServers.Find("web"); !ok || srv.Headers["Authorization"] != "Bearer http-secret" {
		t.Fatalf("stored servers: %+v", stored.MCPServers)
	}
}

// A transport the agent's mcpCapabilities do not offer (the demo agent
// offers stdio and http, not sse) is refused with EInvalid naming it, and
// nothing of the session is left: no record, no log, no workspace, no
// state directory.
func TestMCPTransportTheAgentDoesNotOfferIsRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", MCPServers: []berth.MCPServer{
		{Name: "files", Command: "/bin/true"},
		{Name: "events", Type: berth.MCPSSE, URL: "http://127.0.0.1:9/sse"},
	}})
	var be *berth.Error
	if !berth.IsCode(err, berth.EInvalid) || !errors.As(err, &be) || !strings.Contains(be.Message, "does not offer MCP over sse") ||
		be.Details["transport"] != "sse" || be.Details["field"] != "mcp_servers[1].type" {
		t.Fatalf("create = %v, want invalid_argument naming sse", err)
	}
	page, err := e.m.ListSessions(ctx, berth.SessionFilter{})
	if err != nil || len(page.Sessions) != 0 {
		t.Fatalf("sessions left: %+v %v", page, err)
	}
	for _, dir := range []string{e.m.place.workspacesDir(), e.m.place.sessionsDir()} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("%s still holds %v", filepath.Base(dir), entries)
		}
	}
}

// A resumed session's agent that no longer offers a transport its servers
// need (the catalog entry changed) is refused the same way: the resume is
// EInvalid naming it, and the session stays stopped, its servers kept.
func TestMCPTransportRefusedOnResume(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{MCPServers: testMCPServers(t)})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	e.close()
	e.open(func(o *Options) {
		c := catalog()
		demo := c["demo"]
		demo.Args = []string{"--no-mcp-http"}
		c["demo"] = demo
		o.Catalog = c
	})
	_, err := e.m.ResumeSession(ctx, s.ID)
	var be *berth.Error
	if !berth.IsCode(err, berth.EInvalid) || !errors.As(err, &be) || be.Details["transport"] != "http" || be.Details["field"] != "mcp_servers[1].type" {
		t.Fatalf("resume = %v, want invalid_argument naming http", err)
	}
	got, err := e.m.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != berth.StateStopped || got.StopReason != berth.StopStartupFailed || got.Failure == nil ||
		!strings.Contains(got.Failure.Message, "does not offer MCP over http") || len(got.MCPServers) != 2 {
		t.Fatalf("after the refused resume: %+v %+v", got, got.Failure)
	}
}

// A malformed list is refused before anything is written.
func TestMCPServersValidatedAtCreate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, list := range [][]berth.MCPServer{
		{{Name: "a", Command: "/bin/true"}, {Name: "a", Command: "/bin/true"}},
		{{Name: "a"}},
		{{Name: "w", Type: berth.MCPHTTP, URL: "ftp://x/"}},
	} {
		if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", MCPServers: list}); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("create with %+v = %v, want invalid_argument", list, err)
		}
	}
	if page, _ := e.m.ListSessions(ctx, berth.SessionFilter{}); len(page.Sessions) != 0 {
		t.Fatalf("sessions stored: %+v", page.Sessions)
	}
}

// An http or sse server needs the network: a sandbox without it could
// never reach the server, so the create is refused; the host sandbox
// cannot take the network away.
func TestMCPRemoteServerNeedsNetwork(t *testing.T) {
	remote := []berth.MCPServer{{Name: "files", Command: "/bin/true"}, {Name: "web", Type: berth.MCPHTTP, URL: "https://mcp.example/"}}
	isolated, hostNet := bwrap.New(bwrap.Options{}).Capabilities(), host.New().Capabilities()
	if err := checkMCPNetwork(remote, berth.SandboxBwrap, isolated, false); !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "no network") {
		t.Fatalf("bwrap without network = %v", err)
	}
	for _, ok := range []struct {
		provider string
		caps     berth.SandboxCapabilities
		network  bool
	}{{berth.SandboxBwrap, isolated, true}, {berth.SandboxHost, hostNet, false}} {
		if err := checkMCPNetwork(remote, ok.provider, ok.caps, ok.network); err != nil {
			t.Fatalf("%s network=%v: %v", ok.provider, ok.network, err)
		}
	}
	if err := checkMCPNetwork(remote[:1], berth.SandboxBwrap, isolated, false); err != nil {
		t.Fatalf("a stdio server needs no network: %v", err)
	}
}

// A child is given only MCP servers its parent has, compared whole
// (values included): another server, or the parent's with another secret,
// is 403 naming it. A child that names none inherits the parent's (its
// agent calls them); an empty list gives it none.
func TestChildMCPServersNarrowed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	servers := testMCPServers(t)
	root := e.create(berth.CreateRequest{MCPServers: servers})
	other := servers[0]
	other.Env = map[string]string{mcptest.EnvVar: "stdio", "MCP_SECRET": "a guess"}
	for _, list := range [][]berth.MCPServer{
		{{Name: "new", Command: "/bin/true"}},
		{servers[1], other},
	} {
		_, err := e.m.SpawnChild(ctx, root.ID, berth.CreateRequest{Agent: "demo", TTLSeconds: 60, MCPServers: list}, "")
		if code, what := errWhat(err); code != berth.EForbidden || what != fmt.Sprintf("mcp_servers[%d]", len(list)-1) {
			t.Fatalf("spawn with %+v: %v, want permission_denied naming the last server", list, err)
		}
	}
	inherits := e.spawn(root.ID, berth.CreateRequest{})
	if got := e.mcpTurn(inherits.ID, `mcp tools env {"name":"MCP_SECRET"}`, "completed"); got != "stdio-secret" {
		t.Fatalf("the child's inherited stdio server: %q", got)
	}
	subset := e.spawn(root.ID, berth.CreateRequest{MCPServers: []berth.MCPServer{servers[1]}})
	if got := e.mcpTurn(subset.ID, `mcp tools echo {}`, "failed"); !strings.Contains(got, "(it has: web)") {
		t.Fatalf("a child given web alone: %q", got)
	}
	none := e.spawn(root.ID, berth.CreateRequest{MCPServers: []berth.MCPServer{}})
	if stored, err := e.store.GetSession(ctx, none.ID); err != nil || len(stored.MCPServers) != 0 {
		t.Fatalf("a child given an empty list has %+v (%v)", stored.MCPServers, err)
	}
}
