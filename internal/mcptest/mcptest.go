// Package mcptest is a small MCP server for tests: the demo agent's `mcp`
// command calls its tools over stdio (a test binary serving it in a helper
// mode) or HTTP (an httptest server with the SDK's streamable handler). It
// is built on the official Go MCP SDK, like the agent's client.
package mcptest

import (
	"context"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// EnvVar, set to "stdio", makes a test binary that calls MaybeServeStdio
// in its TestMain serve the MCP server on its stdin/stdout and exit.
const EnvVar = "BERTH_TEST_MCP_SERVER"

// FailText is what the fail tool answers, as an error result.
const FailText = "the tool failed on purpose"

// NewServer returns the server with its tools:
//
//	echo {text}    "echo: TEXT"
//	env {name}     the value of the server's environment variable NAME
//	header {name}  the value of the HTTP request's header NAME ("" on stdio)
//	fail {}        an error result, FailText
//	sleep {ms}     answers "slept" after MS milliseconds, or ends with the call
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "berth-test-mcp", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	type name struct {
		Name string `json:"name"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echo the text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
			return textResult("echo: " + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "an environment variable of the server"},
		func(_ context.Context, _ *mcp.CallToolRequest, in name) (*mcp.CallToolResult, any, error) {
			return textResult(os.Getenv(in.Name)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "header", Description: "a header of the HTTP request"},
		func(_ context.Context, req *mcp.CallToolRequest, in name) (*mcp.CallToolResult, any, error) {
			v := ""
			if req.Extra != nil && req.Extra.Header != nil {
				v = req.Extra.Header.Get(in.Name)
			}
			return textResult(v), nil, nil
		})
	type millis struct {
		MS int `json:"ms"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "answer after a while"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in millis) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return textResult("slept"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "always fails"},
		func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			r := textResult(FailText)
			r.IsError = true
			return r, nil, nil
		})
	return s
}

// textResult is a result of one text block.
func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// HTTPHandler serves the server over streamable HTTP.
func HTTPHandler() http.Handler {
	s := NewServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// MaybeServeStdio serves the server on stdin/stdout and exits when EnvVar
// is "stdio"; otherwise it returns at once. Call it first in TestMain.
func MaybeServeStdio() {
	if os.Getenv(EnvVar) != "stdio" {
		return
	}
	if err := NewServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
