package core

// The berth tools socket's names that `berth mcp` (a relay that links
// neither net nor the root package) shares with the daemon; the root
// package re-exports them.
const (
	// ToolsSocketEnv and ToolsTokenEnv are the environment variables that
	// give `berth mcp` the socket's path and the session's credential.
	ToolsSocketEnv = "BERTH_MCP_SOCKET"
	ToolsTokenEnv  = "BERTH_MCP_TOKEN"
	// ToolsMCPPath is the tools socket's route that becomes, after an
	// HTTP/1.1 upgrade to ToolsMCPProtocol, the berth MCP server's stream
	// of newline-delimited JSON-RPC messages.
	ToolsMCPPath     = "/v1/mcp"
	ToolsMCPProtocol = "berth-mcp"
	// ToolsMCPMaxMessage bounds one MCP message `berth mcp` relays, either
	// way (a prompt of 256 KiB, escaped, is at most 1.5 MiB).
	ToolsMCPMaxMessage = 2 << 20
)
