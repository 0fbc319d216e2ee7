package session

import (
	"context"
	"fmt"

	"github.com/berth-sh/berth"
)

// checkMCPNetwork refuses an http or sse server for a session whose
// sandbox has no network: the agent could never reach it. A sandbox with
// the host's network always has it.
func checkMCPNetwork(l []berth.MCPServer, provider string, caps berth.SandboxCapabilities, network bool) error {
	if network || caps.HostNetwork {
		return nil
	}
	for i, s := range l {
		if t := s.Transport(); t != berth.MCPStdio {
			return &berth.Error{Code: berth.EInvalid,
				Message: fmt.Sprintf("mcp_servers[%d] (%s) is an %s server, but the session has no network in sandbox %s: ask for \"network\": true", i, s.Name, t, provider),
				Details: map[string]any{"field": fmt.Sprintf("mcp_servers[%d].url", i)}}
		}
	}
	return nil
}

// discardRefused removes a session whose create was refused after its
// agent started (an MCP transport its initialize did not offer): the
// caller gets the error, and nothing of the session is left behind.
func (b *birth) discardRefused(ctx context.Context, id string) {
	if err := b.m.DeleteSession(ctx, id); err != nil {
		b.m.logger.Warn("remove a refused session", "session", id, "err", err)
	}
}
