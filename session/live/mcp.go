package live

import (
	"fmt"
	"maps"
	"slices"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// acpMCPServers is a session's MCP servers as ACP mcpServers, env and
// headers in name order.
func acpMCPServers(l berth.MCPServers) []acp.McpServer {
	out := make([]acp.McpServer, 0, len(l))
	for _, s := range l {
		a := acp.McpServer{Type: s.Transport(), Name: s.Name, Command: s.Command, Args: s.Args, URL: s.URL}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			a.Env = append(a.Env, acp.EnvVariable{Name: k, Value: s.Env[k]})
		}
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			a.Headers = append(a.Headers, acp.HTTPHeader{Name: k, Value: s.Headers[k]})
		}
		out = append(out, a)
	}
	return out
}

// checkMCPTransports refuses a server whose transport the agent's
// initialize did not offer in its mcpCapabilities (stdio always is):
// EInvalid naming the transport and the server.
func checkMCPTransports(agent string, caps acp.McpCapabilities, l berth.MCPServers) error {
	for i, s := range l {
		if t := s.Transport(); !caps.Supports(t) {
			return &berth.Error{Code: berth.EInvalid,
				Message: fmt.Sprintf("agent %s does not offer MCP over %s (its mcpCapabilities), which mcp_servers[%d] (%s) needs", agent, t, i, s.Name),
				Details: map[string]any{"field": fmt.Sprintf("mcp_servers[%d].type", i), "transport": t}}
		}
	}
	return nil
}
