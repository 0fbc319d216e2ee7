package core

import (
	"bytes"
	"encoding/json"
	"strconv"
)

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

// JSONRPCIDKey is a JSON-RPC request id as a map key, the same however
// the id was spelled, and as the MCP SDK answers it: a number by its
// integer part (1, 1.0 and 1.5 are one id: the SDK answers 1.5 as 1), a
// string by its text ("a" and "\u0061" are one id). Anything else is
// kept as written.
func JSONRPCIDKey(raw []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "?" + string(raw)
	}
	switch v := v.(type) {
	case string:
		return "s" + v
	case json.Number:
		if n, err := strconv.ParseFloat(string(v), 64); err == nil {
			return "n" + strconv.FormatInt(int64(n), 10)
		}
		return "n" + string(v)
	}
	return "?" + string(raw)
}
