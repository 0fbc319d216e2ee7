package storetest

import (
	"slices"
	"testing"

	"github.com/berth-sh/berth"
)

// testMCPServers checks that a session's MCP servers come back whole,
// secrets included (the API redacts them, the store must not), through
// create, get, list and update.
func testMCPServers(t *testing.T, open Opener) {
	s := fresh(t, open)
	want := newSession("s1", base)
	want.MCPServers = berth.MCPServers{
		{Name: "files", Type: berth.MCPStdio, Command: "/usr/bin/mcp-files", Args: []string{"--root", "/w"},
			Env: map[string]string{"API_KEY": "sk-stdio-secret"}},
		{Name: "docs", Type: berth.MCPHTTP, URL: "https://mcp.example/docs",
			Headers: map[string]string{"Authorization": "Bearer sk-http-secret"}},
	}
	create(t, s, want)
	sameMCP(t, "get", get(t, s, "s1").MCPServers, want.MCPServers)
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("list = %v, %v", page, err)
	}
	sameMCP(t, "list", page.Sessions[0].MCPServers, want.MCPServers)

	// An update of any other field keeps them.
	next := get(t, s, "s1")
	next.Name = "renamed"
	if err := s.UpdateSession(ctx(t), next, ""); err != nil {
		t.Fatal(err)
	}
	sameMCP(t, "after update", get(t, s, "s1").MCPServers, want.MCPServers)
}

// sameMCP fails unless got holds exactly want's servers, values included.
func sameMCP(t *testing.T, what string, got, want berth.MCPServers) {
	t.Helper()
	if !slices.EqualFunc(got, want, berth.MCPServer.Equal) {
		t.Fatalf("%s: MCP servers %+v, want %+v", what, []berth.MCPServer(got), []berth.MCPServer(want))
	}
}
