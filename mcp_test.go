package berth

import (
	"encoding/json"
	"strings"
	"testing"
)

// Every malformed MCP server list is EInvalid naming the field at fault;
// a good one passes, with its stdio servers' type filled in.
func TestMCPServersValidate(t *testing.T) {
	stdio := func() MCPServer {
		return MCPServer{Name: "files", Command: "/bin/mcp", Args: []string{"-v"}, Env: map[string]string{"K": "v"}}
	}
	remote := func(typ string) MCPServer {
		return MCPServer{Name: "docs", Type: typ, URL: "https://mcp.example/x", Headers: map[string]string{"Authorization": "Bearer t"}}
	}
	good := MCPServers{stdio(), remote(MCPHTTP), {Name: "events", Type: MCPSSE, URL: "http://127.0.0.1:9/sse"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good list: %v", err)
	}
	if good[0].Type != MCPStdio {
		t.Fatalf("a stdio server's type is %q after Validate, want stdio", good[0].Type)
	}

	long := strings.Repeat("a", 5000)
	many := make(MCPServers, MaxMCPServers+1)
	for i := range many {
		many[i] = MCPServer{Name: "s" + strings.Repeat("x", i), Command: "/bin/true"}
	}
	big := make(MCPServers, 8)
	for i := range big {
		big[i] = MCPServer{Name: "b" + strings.Repeat("x", i), Command: "/bin/true", Env: map[string]string{}}
		for j := range 4 {
			big[i].Env["V"+strings.Repeat("_", j)] = strings.Repeat("x", 4000)
		}
	}
	with := func(s MCPServer, f func(*MCPServer)) MCPServers { f(&s); return MCPServers{s} }
	for _, c := range []struct {
		name  string
		list  MCPServers
		field string
	}{
		{"too many", many, "mcp_servers"},
		{"too big", big, "mcp_servers"},
		{"no name", with(stdio(), func(s *MCPServer) { s.Name = "" }), "mcp_servers[0].name"},
		{"name with a space", with(stdio(), func(s *MCPServer) { s.Name = "my files" }), "mcp_servers[0].name"},
		{"name too long", with(stdio(), func(s *MCPServer) { s.Name = long[:65] }), "mcp_servers[0].name"},
		{"reserved name", with(stdio(), func(s *MCPServer) { s.Name = "berth" }), "mcp_servers[0].name"},
		{"duplicate", MCPServers{stdio(), remote(MCPHTTP), stdio()}, "mcp_servers[2].name"},
		{"unknown type", with(stdio(), func(s *MCPServer) { s.Type = "websocket" }), "mcp_servers[0].type"},
		{"stdio without command", with(stdio(), func(s *MCPServer) { s.Command = " " }), "mcp_servers[0].command"},
		{"stdio with url", with(stdio(), func(s *MCPServer) { s.URL = "http://x" }), "mcp_servers[0].url"},
		{"stdio with headers", with(stdio(), func(s *MCPServer) { s.Headers = map[string]string{"A": "b"} }), "mcp_servers[0].headers"},
		{"command with NUL", with(stdio(), func(s *MCPServer) { s.Command = "/bin/a\x00b" }), "mcp_servers[0].command"},
		{"command too long", with(stdio(), func(s *MCPServer) { s.Command = long }), "mcp_servers[0].command"},
		{"arg with NUL", with(stdio(), func(s *MCPServer) { s.Args = []string{"ok", "a\x00"} }), "mcp_servers[0].args[1]"},
		{"too many args", with(stdio(), func(s *MCPServer) { s.Args = make([]string, 65) }), "mcp_servers[0].args"},
		{"bad env name", with(stdio(), func(s *MCPServer) { s.Env = map[string]string{"A=B": "x"} }), "mcp_servers[0].env"},
		{"env value with NUL", with(stdio(), func(s *MCPServer) { s.Env = map[string]string{"A": "\x00"} }), "mcp_servers[0].env.A"},
		{"http without url", with(remote(MCPHTTP), func(s *MCPServer) { s.URL = "" }), "mcp_servers[0].url"},
		{"http with a relative url", with(remote(MCPHTTP), func(s *MCPServer) { s.URL = "/mcp" }), "mcp_servers[0].url"},
		{"http with a file url", with(remote(MCPHTTP), func(s *MCPServer) { s.URL = "file:///etc/passwd" }), "mcp_servers[0].url"},
		{"sse with credentials in the url", with(remote(MCPSSE), func(s *MCPServer) { s.URL = "https://u:p@mcp.example/" }), "mcp_servers[0].url"},
		{"http with a command", with(remote(MCPHTTP), func(s *MCPServer) { s.Command = "/bin/sh" }), "mcp_servers[0].command"},
		{"http with env", with(remote(MCPHTTP), func(s *MCPServer) { s.Env = map[string]string{"K": "v"} }), "mcp_servers[0].env"},
		{"bad header name", with(remote(MCPHTTP), func(s *MCPServer) { s.Headers = map[string]string{"Bad Name": "v"} }), "mcp_servers[0].headers"},
		{"header value with a newline", with(remote(MCPHTTP), func(s *MCPServer) { s.Headers = map[string]string{"X": "a\r\nInjected: 1"} }), "mcp_servers[0].headers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.list.Validate()
			var e *Error
			if !IsCode(err, EInvalid) || !asError(err, &e) || e.Details["field"] != c.field {
				t.Fatalf("Validate = %v (details %v), want invalid_argument naming %s", err, detailsOf(err), c.field)
			}
		})
	}
}

// asError unwraps err to an *Error.
func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// detailsOf returns the details of an *Error, for messages.
func detailsOf(err error) map[string]any {
	if e, ok := err.(*Error); ok {
		return e.Details
	}
	return nil
}

// A session's MCP servers are shown with every env and header value
// redacted and their names kept; the list itself is not changed.
func TestMCPServersRedactedInJSON(t *testing.T) {
	s := Session{ID: "ses_x", MCPServers: MCPServers{
		{Name: "files", Type: MCPStdio, Command: "/bin/mcp", Args: []string{"--root", "/w"}, Env: map[string]string{"API_KEY": "sk-stdio-secret"}},
		{Name: "docs", Type: MCPHTTP, URL: "https://mcp.example/x", Headers: map[string]string{"Authorization": "Bearer sk-http-secret"}},
	}}
	b, err := json.Marshal(&s)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, secret := range []string{"sk-stdio-secret", "sk-http-secret"} {
		if strings.Contains(out, secret) {
			t.Fatalf("a secret is shown: %s", out)
		}
	}
	for _, kept := range []string{`"API_KEY":"[redacted]"`, `"Authorization":"[redacted]"`, `"command":"/bin/mcp"`, `"url":"https://mcp.example/x"`} {
		if !strings.Contains(out, kept) {
			t.Fatalf("%s missing from %s", kept, out)
		}
	}
	if s.MCPServers[0].Env["API_KEY"] != "sk-stdio-secret" {
		t.Fatal("marshalling changed the session's own list")
	}
	// A request keeps its values: the client sends them to the daemon.
	rb, _ := json.Marshal(CreateRequest{Agent: "demo", MCPServers: s.MCPServers})
	if !strings.Contains(string(rb), "sk-http-secret") {
		t.Fatalf("a create request lost its header value: %s", rb)
	}
}

// Equal and Contains compare whole servers, secrets included: a child may
// be given only a server its parent was given, exactly.
func TestMCPServersContains(t *testing.T) {
	a := MCPServer{Name: "files", Command: "/bin/mcp", Env: map[string]string{"K": "v"}}
	list := MCPServers{a, {Name: "docs", Type: MCPHTTP, URL: "https://x/"}}
	same := a
	same.Type = MCPStdio // "" and "stdio" are the same transport
	if !list.Contains(same) {
		t.Fatal("the same server is not contained")
	}
	for _, other := range []MCPServer{
		{Name: "files", Command: "/bin/mcp", Env: map[string]string{"K": "other"}},
		{Name: "files", Command: "/bin/mcp"},
		{Name: "files", Command: "/bin/mcp", Args: []string{"x"}, Env: map[string]string{"K": "v"}},
		{Name: "docs", Type: MCPSSE, URL: "https://x/"},
		{Name: "docs", Type: MCPHTTP, URL: "https://y/"},
	} {
		if list.Contains(other) {
			t.Errorf("%+v is contained", other)
		}
	}
	if s, ok := list.Find("docs"); !ok || s.URL != "https://x/" {
		t.Fatalf("Find(docs) = %+v, %v", s, ok)
	}
	if _, ok := list.Find("nope"); ok {
		t.Fatal("Find(nope) found one")
	}
}
