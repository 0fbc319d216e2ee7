package acp

import (
	"context"
	"encoding/json"
)

// MethodSessionFork forks a conversation (unstable in the ACP schema).
const MethodSessionFork = "session/fork"

// ForkTurnsMeta is the _meta key, in session/fork's request, of how many
// prompts of the source conversation the fork keeps. ACP's session/fork
// copies the whole conversation and has no field for a cut, so berth uses
// it only with an agent whose fork capability's _meta says it honours this
// key (see CanForkAtTurn).
const ForkTurnsMeta = "berth.sh/turns"

// ForkSessionRequest is session/fork's request.
type ForkSessionRequest struct {
	SessionID  string         `json:"sessionId"`
	Cwd        string         `json:"cwd"`
	McpServers []McpServer    `json:"mcpServers"`
	Meta       map[string]any `json:"_meta,omitempty"`
}

// ForkSessionResponse answers session/fork.
type ForkSessionResponse struct {
	SessionID string `json:"sessionId"`
	// The forked conversation's controls, as session/new gives them.
	SessionSetup
}

// CanForkAtTurn reports whether the agent offers session/fork and says, in
// the capability's _meta, that it keeps only the prompts ForkTurnsMeta
// names.
func (c AgentCapabilities) CanForkAtTurn() bool {
	if len(c.SessionCapabilities.Fork) == 0 {
		return false
	}
	var capab struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(c.SessionCapabilities.Fork, &capab) != nil {
		return false
	}
	return string(capab.Meta[ForkTurnsMeta]) == "true"
}

// ForkSession forks the agent's conversation sessionID into a new one
// working in cwd that keeps its first keepTurns prompts, and returns the
// new session's id and the controls it offers.
func (c *Client) ForkSession(ctx context.Context, sessionID, cwd string, mcp []McpServer, keepTurns int) (ForkSessionResponse, error) {
	var resp ForkSessionResponse
	err := c.conn.Call(ctx, MethodSessionFork, ForkSessionRequest{SessionID: sessionID, Cwd: cwd, McpServers: orEmpty(mcp),
		Meta: map[string]any{ForkTurnsMeta: keepTurns}}, &resp)
	return resp, err
}
