package http

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/berthmcp"
	"github.com/berth-sh/berth/internal/core"
)

// The berth tools API: what a session's tools socket answers (docs/api.md,
// The berth MCP server), each request with the session's credential as a
// bearer token. GET /v1/mcp, upgraded to berth-mcp, is the berth MCP server
// itself over the connection (newline-delimited JSON-RPC, as on stdio):
// `berth mcp`, which the agent runs, relays its stdin and stdout to it.
// POST /v1/tools/{tool} calls one tool with its arguments as the JSON body
// and answers its result or the API's error JSON: what a `berth mcp` of an
// older berth, still running beside its agent, calls. Nothing else is
// served on the socket.

// ToolsPath is the path of a tool's call on a tools socket.
func ToolsPath(tool string) string { return "/v1/tools/" + tool }

// maxMCPCalls bounds the session's tool calls in flight over MCP, and
// maxMCPStreams its MCP streams (each `berth mcp` holds one): the agent
// is on the other side.
const (
	maxMCPCalls   = 16
	maxMCPStreams = 4
)

// toolsHandler serves one session's tools socket.
type toolsHandler struct {
	open    berth.ToolsOpener
	log     *slog.Logger
	version string
	maxBody int64
	// calls holds one token per tool call in flight over MCP.
	calls chan struct{}
	// streams counts the MCP streams open.
	streams atomic.Int32
	// writeTimeout bounds a write to an MCP stream (mcpWriteTimeout).
	writeTimeout time.Duration
}

// NewToolsHandler returns the handler of a session's tools socket: open
// authorises each call by its bearer token. maxPromptBytes bounds a
// prompt's text (0: the default), and so the body; version is the one the
// MCP server names.
func NewToolsHandler(open berth.ToolsOpener, maxPromptBytes int, version string, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &toolsHandler{open: open, log: log, version: version, maxBody: bodyLimitFor(maxPromptOf(maxPromptBytes)),
		calls: make(chan struct{}, maxMCPCalls), writeTimeout: mcpWriteTimeout}
}

// ServeHTTP implements http.Handler.
func (h *toolsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == core.ToolsMCPPath {
		h.serveMCP(w, r)
		return
	}
	tool, ok := strings.CutPrefix(r.URL.Path, "/v1/tools/")
	if !ok || r.Method != http.MethodPost {
		h.fail(w, r, berth.Errorf(berth.ENotFound, "no such path: the tools socket answers GET %s and POST /v1/tools/{tool}", core.ToolsMCPPath))
		return
	}
	tools, done, err := h.authorise(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer done()
	out, err := h.call(r.Context(), tools, tool, func(v any) error { return decodeStrict(w, r, v, h.maxBody) })
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// authorise opens the session's tools by the request's bearer token.
func (h *toolsHandler) authorise(r *http.Request) (berth.ChildTools, func(), error) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return h.open(token)
}

// serveMCP upgrades the connection to the berth MCP server, which it
// serves until either side closes it (or the session's tools are
// revoked: the socket's server closes its connections).
func (h *toolsHandler) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !strings.EqualFold(r.Header.Get("Upgrade"), core.ToolsMCPProtocol) {
		h.fail(w, r, berth.Errorf(berth.EInvalid, "%s is GET with Connection: Upgrade and Upgrade: %s", core.ToolsMCPPath, core.ToolsMCPProtocol))
		return
	}
	tools, done, err := h.authorise(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer done()
	if h.streams.Add(1) > maxMCPStreams {
		h.streams.Add(-1)
		h.fail(w, r, berth.Errorf(berth.ERateLimited, "this session has %d berth MCP streams open already, the most it may", maxMCPStreams))
		return
	}
	defer h.streams.Add(-1)
	hj, ok := w.(http.Hijacker)
	if !ok {
		h.fail(w, r, berth.Errorf(berth.EInternal, "the tools socket cannot upgrade this connection"))
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		h.log.Warn("berth tools: cannot take the MCP connection", "err", err)
		return
	}
	defer conn.Close()
	// The server's read timeout was for the request; the stream has none.
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+
		core.ToolsMCPProtocol+"\r\n\r\n"); err != nil {
		return
	}
	// A message holds a tool's largest arguments (a prompt), as a call's
	// body on the HTTP route, and anything `berth mcp` passes: what it
	// refuses, it answers itself, and nothing it passes ends the stream.
	maxLine := max(int(h.maxBody), core.ToolsMCPMaxMessage) + 64<<10
	wire := &mcpWire{conn: conn, br: rw.Reader, writeTimeout: h.writeTimeout}
	transport := boundedTransport{&mcp.IOTransport{Reader: wire, Writer: wire, MaxLineLength: maxLine}}
	ss, err := sharedMCP(h.version).Connect(berthmcp.WithCaller(r.Context(), h.caller(tools)), transport, nil)
	if err != nil {
		h.log.Warn("berth tools: cannot serve MCP", "err", err)
		return
	}
	_ = ss.Wait()
}

// mcpServers are the berth MCP servers of this process, by version: one
// serves every session's connections (its tools' schemas are resolved
// once; each connection brings its session's tools in its context).
var mcpServers struct {
	sync.Mutex
	byVersion map[string]*mcp.Server
}

// sharedMCP is the berth MCP server naming version.
func sharedMCP(version string) *mcp.Server {
	mcpServers.Lock()
	defer mcpServers.Unlock()
	if mcpServers.byVersion == nil {
		mcpServers.byVersion = map[string]*mcp.Server{}
	}
	srv := mcpServers.byVersion[version]
	if srv == nil {
		srv = berthmcp.NewServer(version)
		mcpServers.byVersion[version] = srv
	}
	return srv
}

// caller calls the tools for the MCP server, with the arguments decoded
// as strictly as the tools' HTTP route does, at most maxMCPCalls of the
// session's at once.
func (h *toolsHandler) caller(tools berth.ChildTools) berthmcp.Caller {
	return func(ctx context.Context, tool string, in, out any) error {
		select {
		case h.calls <- struct{}{}:
			defer func() { <-h.calls }()
		default:
			return berth.Errorf(berth.ERateLimited, "more than %d berth tool calls at once", maxMCPCalls)
		}
		args, err := json.Marshal(in)
		if err != nil {
			return berth.WrapError(berth.EInvalid, err, "the tool's arguments are not JSON")
		}
		res, err := h.call(ctx, tools, tool, func(v any) error { return decodeStrictBytes(args, v, h.maxBody) })
		if err != nil {
			return err
		}
		b, err := json.Marshal(res)
		if err != nil {
			return berth.WrapError(berth.EInternal, err, "the tool's answer")
		}
		return json.Unmarshal(b, out)
	}
}

// call decodes the arguments of tool and calls it.
func (h *toolsHandler) call(ctx context.Context, tools berth.ChildTools, tool string, decode func(any) error) (any, error) {
	switch tool {
	case berth.ToolSpawnChild:
		return callTool(decode, func(a berth.SpawnChildArgs) (any, error) { return tools.SpawnChild(ctx, a) })
	case berth.ToolPromptChild:
		return callTool(decode, func(a berth.PromptChildArgs) (any, error) { return tools.PromptChild(ctx, a) })
	case berth.ToolWaitChild:
		return callTool(decode, func(a berth.WaitChildArgs) (any, error) { return tools.WaitChild(ctx, a) })
	case berth.ToolListChildren:
		return callTool(decode, func(struct{}) (any, error) { return tools.ListChildren(ctx) })
	case berth.ToolStopChild:
		return callTool(decode, func(a berth.ChildArgs) (any, error) { return tools.StopChild(ctx, a) })
	}
	return nil, berth.Errorf(berth.ENotFound, "no berth tool %q", tool)
}

// callTool decodes a tool's arguments, of type A, as strictly as the API
// does, and calls fn with them.
func callTool[A any](decode func(any) error, fn func(A) (any, error)) (any, error) {
	var a A
	if err := decode(&a); err != nil {
		return nil, err
	}
	return fn(a)
}

// fail answers err as the API's error JSON.
func (h *toolsHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	obj := errorObjectOf(err)
	if obj.Code == berth.EInternal {
		h.log.Error("berth tools: internal error", "path", r.URL.Path, "err", err)
	}
	writeJSON(w, StatusForCode(obj.Code), errorBody{Error: obj})
}
