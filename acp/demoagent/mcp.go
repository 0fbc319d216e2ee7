package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// mcpCallTimeout bounds one `mcp` command: connecting, the call, and
	// its answer.
	mcpCallTimeout = 60 * time.Second
	// mcpTerminate is how long a stdio server may take to exit once its
	// stdin is closed, before it is sent SIGTERM (then SIGKILL).
	mcpTerminate = 2 * time.Second
)

// mcpCall: SERVER TOOL [JSON] → tools/call of TOOL with the JSON object as
// its arguments on the session's MCP server named SERVER, shown as a
// tool_call (kind fetch) that ends completed or failed, then the tool's
// text as a message, or "mcp error: …" for an error result, an unknown
// server or a failed connection. Each call connects anew (a stdio server
// is started, as the agent's child, and ended after the call).
func (t *turn) mcpCall(args string) error {
	server, rest := cutWord(args)
	tool, raw := cutWord(rest)
	if server == "" || tool == "" {
		return t.say("usage: mcp SERVER TOOL JSON")
	}
	arguments := map[string]any{}
	if strings.TrimSpace(raw) != "" {
		if err := json.Unmarshal([]byte(raw), &arguments); err != nil {
			return t.say("usage: mcp SERVER TOOL JSON (the arguments are a JSON object)")
		}
	}
	id := t.a.nextToolCallID()
	if err := t.update(acp.StartToolCall(id, "mcp "+server+" "+tool,
		acp.WithStartKind(acp.ToolKindFetch),
		acp.WithStartStatus(acp.ToolCallStatusPending),
		acp.WithStartRawInput(map[string]any{"server": server, "tool": tool, "arguments": arguments}))); err != nil {
		return err
	}
	const prefix = "mcp error: "
	srv, known := t.s.mcpServer(server)
	if !known {
		return t.toolFailed(id, prefix, fmt.Sprintf("no MCP server named %q in this session (it has: %s)", server, t.s.mcpNames()))
	}
	if err := t.toolStatus(id, acp.ToolCallStatusInProgress); err != nil {
		return err
	}
	text, isError, err := t.callTool(srv, tool, arguments)
	switch {
	case err != nil:
		return t.toolFailed(id, prefix, err.Error())
	case isError:
		return t.toolFailed(id, prefix, text)
	}
	if err := t.toolStatus(id, acp.ToolCallStatusCompleted, acp.WithUpdateContent(textContent(text))); err != nil {
		return err
	}
	return t.say(text)
}

// callTool connects to srv, calls tool and returns the text of its result
// and whether the result is an error.
func (t *turn) callTool(srv acp.McpServer, tool string, arguments map[string]any) (string, bool, error) {
	transport, err := t.mcpTransport(srv)
	if err != nil {
		return "", false, err
	}
	ctx, cancel := context.WithTimeout(t.ctx, mcpCallTimeout)
	defer cancel()
	// The call's own HTTP connections end with it.
	defer closeIdle(transport)
	client := mcp.NewClient(&mcp.Implementation{Name: agentName, Version: agentVersion}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return "", false, fmt.Errorf("connect to %s: %w", mcpServerName(srv), err)
	}
	// Close ends a stdio server (stdin closed, then signals) and waits for it.
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		return "", false, err
	}
	return resultText(res), res.IsError, nil
}

// mcpTransport is the SDK transport for a server of any kind. A stdio
// server runs in the session's cwd with the agent's environment plus its
// own env, and its stderr is the agent's.
func (t *turn) mcpTransport(srv acp.McpServer) (mcp.Transport, error) {
	switch {
	case srv.Stdio != nil:
		cmd := exec.Command(srv.Stdio.Command, srv.Stdio.Args...)
		cmd.Dir = t.cwd
		cmd.Env = os.Environ()
		for _, e := range srv.Stdio.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		cmd.Stderr = t.a.stderr
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: mcpTerminate}, nil
	case srv.Http != nil:
		return &mcp.StreamableClientTransport{Endpoint: srv.Http.Url, HTTPClient: headerClient(srv.Http.Headers),
			MaxRetries: -1, DisableStandaloneSSE: true}, nil
	case srv.Sse != nil:
		return &mcp.SSEClientTransport{Endpoint: srv.Sse.Url, HTTPClient: headerClient(srv.Sse.Headers)}, nil
	}
	return nil, errors.New("the MCP server's transport is not one this agent speaks")
}

// headerClient is an HTTP client of its own that sends headers with every
// request.
func headerClient(headers []acp.HttpHeader) *http.Client {
	h := http.Header{}
	for _, kv := range headers {
		h.Add(kv.Name, kv.Value)
	}
	return &http.Client{Transport: headerTransport{h: h, base: http.DefaultTransport.(*http.Transport).Clone()}}
}

// closeIdle closes the idle connections of an HTTP transport's client.
func closeIdle(t mcp.Transport) {
	switch t := t.(type) {
	case *mcp.StreamableClientTransport:
		t.HTTPClient.CloseIdleConnections()
	case *mcp.SSEClientTransport:
		t.HTTPClient.CloseIdleConnections()
	}
}

// headerTransport adds h to each request.
type headerTransport struct {
	h    http.Header
	base *http.Transport
}

// CloseIdleConnections closes the base transport's idle connections.
func (ht headerTransport) CloseIdleConnections() { ht.base.CloseIdleConnections() }

// RoundTrip implements http.RoundTripper.
func (ht headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range ht.h {
		r.Header[k] = vs
	}
	return ht.base.RoundTrip(r)
}

// resultText is a tool result as text: its text blocks one per line, other
// blocks named, and the structured result when there is no content.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, "[resource "+c.URI+"]")
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				parts = append(parts, "[resource "+c.Resource.URI+"]")
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}

// mcpServerName is the name a server was given.
func mcpServerName(s acp.McpServer) string {
	switch {
	case s.Stdio != nil:
		return s.Stdio.Name
	case s.Http != nil:
		return s.Http.Name
	case s.Sse != nil:
		return s.Sse.Name
	case s.Acp != nil:
		return s.Acp.Name
	}
	return ""
}

// setMCP records the MCP servers the client gave the session (session/new
// or session/load).
func (s *session) setMCP(servers []acp.McpServer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcp = servers
}

// mcpServer returns the session's server named name.
func (s *session) mcpServer(name string) (acp.McpServer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, srv := range s.mcp {
		if mcpServerName(srv) == name {
			return srv, true
		}
	}
	return acp.McpServer{}, false
}

// mcpNames lists the session's server names, or "none".
func (s *session) mcpNames() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, srv := range s.mcp {
		names = append(names, mcpServerName(srv))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
