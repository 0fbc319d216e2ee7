// Package berthmcp is the berth MCP server (docs/api.md, "The berth MCP server:
// agents spawn children"), which the daemon serves on each session's tools
// socket and every session's agent reaches through `berth mcp` (package
// mcprelay), given in its ACP mcpServers. Its tools — spawn_child,
// prompt_child, wait_child, list_children, stop_child — act as that session,
// whose credential the connection was authorised by. It is built on the
// official Go MCP SDK.
package berthmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-sh/berth"
)

// Bounds of the tools' arguments, in their input schemas.
const (
	maxAgentLen  = 128
	maxNameLen   = 256
	maxPromptLen = 256 << 10
	maxIDLen     = 64
	maxEntryLen  = 300
)

// Caller calls one of the session's tools, decoding its answer into out;
// an error is a *berth.Error with the daemon's code.
type Caller func(ctx context.Context, tool string, in, out any) error

// callerKey is the context key of a connection's Caller.
type callerKey struct{}

// WithCaller is ctx carrying call: the context to connect a session of
// the server with, whose tools then call call. One server (its tools and
// their schemas) serves every session's connections.
func WithCaller(ctx context.Context, call Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, call)
}

// callerOf is the Caller the connection of ctx was made with.
func callerOf(ctx context.Context) Caller {
	if call, ok := ctx.Value(callerKey{}).(Caller); ok {
		return call
	}
	return func(context.Context, string, any, any) error {
		return berth.Errorf(berth.EInternal, "the berth MCP server was connected without its session's tools")
	}
}

// NewServer returns the MCP server, whose tools call the Caller their
// connection was made with (WithCaller).
func NewServer(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: berth.ToolsServerName, Title: "berth child sessions", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: berth.ToolSpawnChild, InputSchema: spawnSchema(),
		Description: "Start a child session: another agent working in this session's workspace, in a sandbox no looser than this one, " +
			"stopped when this session stops or after ttl_seconds. prompt, when given, is its first prompt. Answers {child_id}."},
		handler[berth.SpawnChildArgs, berth.SpawnChildResult](berth.ToolSpawnChild))
	mcp.AddTool(s, &mcp.Tool{Name: berth.ToolPromptChild, InputSchema: promptSchema(),
		Description: "Send a prompt to a child session (queued behind its turn in flight). With wait, answer only once that turn ended, " +
			"with its stop_reason and the child's text."},
		handler[berth.PromptChildArgs, berth.PromptChildResult](berth.ToolPromptChild))
	mcp.AddTool(s, &mcp.Tool{Name: berth.ToolWaitChild, InputSchema: waitSchema(),
		Description: "Wait up to timeout_seconds until a child session has nothing left to do (idle, waiting for a decision, or stopped). " +
			"Answers its state, the stop_reason and its last message as text; timed_out when it was still busy."},
		handler[berth.WaitChildArgs, berth.WaitChildResult](berth.ToolWaitChild))
	mcp.AddTool(s, &mcp.Tool{Name: berth.ToolListChildren, InputSchema: object(nil),
		Description: "List this session's child sessions: [{child_id, name, state, badge}]."},
		listHandler())
	mcp.AddTool(s, &mcp.Tool{Name: berth.ToolStopChild, InputSchema: object(map[string]*jsonschema.Schema{"child_id": idSchema()}, "child_id"),
		Description: "Stop a child session (its own children stop with it)."},
		handler[berth.ChildArgs, berth.ChildInfo](berth.ToolStopChild))
	s.AddReceivingMiddleware(codedArgumentErrors)
	return s
}

// codedArgumentErrors gives the arguments the SDK refuses (against a
// tool's input schema, before its handler runs) berth's code for bad
// input, like every other tool error: "invalid_argument: …".
func codedArgumentErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || !r.IsError || len(r.Content) != 1 {
			return res, err
		}
		if t, ok := r.Content[0].(*mcp.TextContent); ok && !coded(t.Text) {
			t.Text = berth.EInvalid + ": " + t.Text
		}
		return res, err
	}
}

// coded reports whether a tool error's text starts with a berth code.
func coded(text string) bool {
	code, _, ok := strings.Cut(text, ": ")
	return ok && berthCodes[code]
}

// berthCodes are the error codes a tool error may start with.
var berthCodes = map[string]bool{
	berth.EInvalid: true, berth.EUnauthenticated: true, berth.EForbidden: true, berth.ENotFound: true,
	berth.EConflict: true, berth.ETooLarge: true, berth.EQueueFull: true, berth.EUnsupportedMedia: true,
	berth.ERateLimited: true, berth.EUnavailable: true, berth.EInternal: true,
}

// handler is a tool handler that calls tool with its arguments and
// answers the daemon's result, or an error result whose text is the
// daemon's error code and message.
func handler[In, Out any](tool string) mcp.ToolHandlerFor[In, *Out] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, *Out, error) {
		var out Out
		if err := callerOf(ctx)(ctx, tool, in, &out); err != nil {
			return nil, nil, toolError(err)
		}
		return nil, &out, nil
	}
}

// listHandler is list_children's handler: its text is the JSON array of
// the children, its structured content {"children": [...]}.
func listHandler() mcp.ToolHandlerFor[struct{}, *berth.ChildrenResult] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, *berth.ChildrenResult, error) {
		var out berth.ChildrenResult
		if err := callerOf(ctx)(ctx, berth.ToolListChildren, struct{}{}, &out); err != nil {
			return nil, nil, toolError(err)
		}
		if out.Children == nil {
			out.Children = []berth.ChildInfo{}
		}
		text, err := json.Marshal(out.Children)
		if err != nil {
			return nil, nil, toolError(err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, &out, nil
	}
}

// toolError is err as a tool error: "CODE: message".
func toolError(err error) error {
	return fmt.Errorf("%s: %s", berth.ErrorCode(err), berth.ErrorMessage(err))
}

// object is an object schema with props, the required ones, and no others.
func object(props map[string]*jsonschema.Schema, required ...string) *jsonschema.Schema {
	if props == nil {
		props = map[string]*jsonschema.Schema{}
	}
	return &jsonschema.Schema{Type: "object", Properties: props, Required: required,
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
}

// str is a string schema of at most max bytes, at least min.
func str(desc string, min, max int) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc, MinLength: &min, MaxLength: &max}
}

// integer is an integer schema between min and max.
func integer(desc string, min, max float64) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "integer", Description: desc, Minimum: &min, Maximum: &max}
}

// idSchema is a child session's id.
func idSchema() *jsonschema.Schema {
	s := str("the child session's id (ses_…)", 1, maxIDLen)
	s.Pattern = "^ses_[0-9a-z]+$"
	return s
}

func spawnSchema() *jsonschema.Schema {
	return object(map[string]*jsonschema.Schema{
		"agent":       str("the agent to run (see berth agents); default: this session's", 0, maxAgentLen),
		"prompt":      str("the child's first prompt", 0, maxPromptLen),
		"name":        str("a name for the child", 0, maxNameLen),
		"ttl_seconds": integer("the child is stopped after this many seconds", 1, berth.MaxSessionSeconds),
		"permission_mode": {Type: "string", Description: "no looser than this session's; default: this session's",
			Enum: []any{berth.PermDenyAll, berth.PermAsk, berth.PermApproveReads, berth.PermApproveAll}},
		"network": networkSchema(),
		"max_cost_usd": {Type: "number", Description: "the child's budget in US dollars of model calls (this session's budget counts its spending too)",
			Minimum: new(0.0)},
		"max_tokens": {Type: "integer", Description: "the child's budget in tokens of model calls", Minimum: new(0.0)},
	}, "ttl_seconds")
}

// networkSchema is spawn_child's network: the create body's forms
// (docs/api.md, Network policy), which the daemon narrows to the
// caller's.
func networkSchema() *jsonschema.Schema {
	entries := berth.MaxNetworkEntries
	return &jsonschema.Schema{
		Description: "the child's network, never wider than this session's: false (none but the model gateway), true (the open network), " +
			`or {"allow": ["api.github.com", "*.npmjs.org", "pypi.org:443"], "ask": false} (only those hosts; ask: a refused host becomes a permission request)`,
		AnyOf: []*jsonschema.Schema{
			{Type: "boolean"},
			object(map[string]*jsonschema.Schema{
				"allow": {Type: "array", Items: str("a host name, *.domain, an address, each with an optional :port", 1, maxEntryLen), MaxItems: &entries},
				"ask":   {Type: "boolean", Description: "a host the list does not name becomes a permission request (only when this session asks too)"},
			}, "allow"),
		},
	}
}

func promptSchema() *jsonschema.Schema {
	return object(map[string]*jsonschema.Schema{
		"child_id": idSchema(),
		"text":     str("the prompt", 1, maxPromptLen),
		"wait":     {Type: "boolean", Description: "answer once the prompt's turn ended, with its text"},
	}, "child_id", "text")
}

func waitSchema() *jsonschema.Schema {
	return object(map[string]*jsonschema.Schema{
		"child_id":        idSchema(),
		"timeout_seconds": integer("how long to wait at most (0: do not wait)", 0, berth.MaxWaitChildSeconds),
	}, "child_id")
}
