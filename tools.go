package berth

import (
	"context"

	"github.com/berth-sh/berth/internal/core"
)

// The berth MCP server (docs/api.md, "The berth MCP server: agents spawn
// children"). Every session's agent is given an MCP server named "berth" whose
// tools act as that session on its own subtree. The agent starts `berth mcp`
// inside its sandbox: a relay of its stdin and stdout to the server the daemon
// runs on a Unix socket it serves for that one session, in a directory bound
// read-only at ToolsDir inside the sandbox; the relay proves who it is with a
// random credential given in its environment.

const (
	// ToolsServerName is the name of the berth MCP server in mcpServers.
	ToolsServerName = "berth"
	// ToolsDir is where a sandbox sees its session's tools socket directory.
	ToolsDir = "/run/berth-mcp"
	// ToolsSocketName is the socket's name in that directory.
	ToolsSocketName = "s"
	// ToolsSocketEnv and ToolsTokenEnv are the environment variables that
	// give `berth mcp` the socket's path and the session's credential.
	ToolsSocketEnv = core.ToolsSocketEnv
	ToolsTokenEnv  = core.ToolsTokenEnv
	// ToolsMCPPath is the socket's route that upgrades to the berth MCP
	// server itself (core.ToolsMCPPath).
	ToolsMCPPath = core.ToolsMCPPath
	// MaxWaitChildSeconds bounds wait_child's timeout_seconds.
	MaxWaitChildSeconds = 3600
)

// The berth MCP server's tools.
const (
	ToolSpawnChild   = "spawn_child"
	ToolPromptChild  = "prompt_child"
	ToolWaitChild    = "wait_child"
	ToolListChildren = "list_children"
	ToolStopChild    = "stop_child"
)

// SpawnChildArgs are spawn_child's arguments: a subset of the create body.
// Agent "" is the calling session's agent.
type SpawnChildArgs struct {
	Agent          string `json:"agent,omitempty"`
	Prompt         string `json:"prompt,omitempty"`
	Name           string `json:"name,omitempty"`
	TTLSeconds     int    `json:"ttl_seconds"`
	PermissionMode string `json:"permission_mode,omitempty"`
	// Network is the child's network in the create body's forms
	// (docs/api.md, Network policy): false, true or an allow list, never
	// wider than the caller's (EForbidden naming network).
	Network NetworkPolicy `json:"network,omitzero"`
	// MaxCostUSD and MaxTokens are the child's own budgets (docs/api.md,
	// "Usage and budgets"); its spending counts against its ancestors'
	// either way.
	MaxCostUSD *float64 `json:"max_cost_usd,omitempty"`
	MaxTokens  *int64   `json:"max_tokens,omitempty"`
}

// SpawnChildResult is spawn_child's answer.
type SpawnChildResult struct {
	ChildID string `json:"child_id"`
	State   State  `json:"state"`
}

// PromptChildArgs are prompt_child's arguments; Wait answers only once
// the prompt's turn ended.
type PromptChildArgs struct {
	ChildID string `json:"child_id"`
	Text    string `json:"text"`
	Wait    bool   `json:"wait,omitempty"`
}

// PromptChildResult is prompt_child's answer: the prompt's status and
// turn (or queue entry), and with wait the turn's stop reason and text.
type PromptChildResult struct {
	Status     string `json:"status,omitempty"`
	TurnID     string `json:"turn_id,omitempty"`
	EntryID    string `json:"entry_id,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	Text       string `json:"text"`
}

// WaitChildArgs are wait_child's arguments (0 seconds: look, do not wait).
type WaitChildArgs struct {
	ChildID        string `json:"child_id"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty"`
}

// WaitChildResult is wait_child's answer: the child's state once it has
// nothing left to do (idle, waiting for a decision, or stopped) or the
// timeout passed (TimedOut). StopReason is the session's for a stopped
// child, else its last turn's; Text is its last agent message.
type WaitChildResult struct {
	ChildID    string `json:"child_id"`
	State      State  `json:"state"`
	Badge      Badge  `json:"badge"`
	StopReason string `json:"stop_reason,omitempty"`
	Text       string `json:"text"`
	TimedOut   bool   `json:"timed_out"`
}

// ChildArgs name one child (stop_child).
type ChildArgs struct {
	ChildID string `json:"child_id"`
}

// ChildInfo is one entry of list_children, and stop_child's answer.
type ChildInfo struct {
	ChildID    string     `json:"child_id"`
	Name       string     `json:"name"`
	State      State      `json:"state"`
	Badge      Badge      `json:"badge"`
	StopReason StopReason `json:"stop_reason,omitempty"`
}

// ChildrenResult is list_children's answer.
type ChildrenResult struct {
	Children []ChildInfo `json:"children"`
}

// ChildTools are the berth MCP server's tools as one session: every call
// acts only on that session's subtree (its children, theirs, ...), with
// the limits of the API. A child outside it is ENotFound.
type ChildTools interface {
	SpawnChild(ctx context.Context, a SpawnChildArgs) (*SpawnChildResult, error)
	PromptChild(ctx context.Context, a PromptChildArgs) (*PromptChildResult, error)
	WaitChild(ctx context.Context, a WaitChildArgs) (*WaitChildResult, error)
	ListChildren(ctx context.Context) (*ChildrenResult, error)
	StopChild(ctx context.Context, a ChildArgs) (*ChildInfo, error)
}

// ToolsOpener authorises one call on a session's tools socket by the
// credential it presents: the session's tools, and done, to call once the
// call has ended. A wrong credential, or one of a stopped session, is
// EUnauthenticated.
type ToolsOpener func(token string) (tools ChildTools, done func(), err error)
