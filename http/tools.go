package http

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// The berth tools API: what a session's tools socket answers (docs/api.md,
// The berth MCP server). `berth mcp`, the MCP server an agent runs, calls
// POST /v1/tools/{tool} with the tool's arguments as the JSON body and the
// session's credential as a bearer token; the answer is the tool's result,
// or the API's error JSON. Nothing else is served on the socket.

// ToolsPath is the path of a tool's call on a tools socket.
func ToolsPath(tool string) string { return "/v1/tools/" + tool }

// toolsHandler serves one session's tools socket.
type toolsHandler struct {
	open    berth.ToolsOpener
	log     *slog.Logger
	maxBody int64
}

// NewToolsHandler returns the handler of a session's tools socket: open
// authorises each call by its bearer token. maxPromptBytes bounds a
// prompt's text (0: the default), and so the body.
func NewToolsHandler(open berth.ToolsOpener, maxPromptBytes int, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &toolsHandler{open: open, log: log, maxBody: bodyLimitFor(maxPromptOf(maxPromptBytes))}
}

// ServeHTTP implements http.Handler.
func (h *toolsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tool, ok := strings.CutPrefix(r.URL.Path, "/v1/tools/")
	if !ok || r.Method != http.MethodPost {
		h.fail(w, r, berth.Errorf(berth.ENotFound, "no such path: the tools socket answers POST /v1/tools/{tool}"))
		return
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	tools, done, err := h.open(token)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer done()
	out, err := h.call(r.Context(), tools, tool, r, w)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// call decodes the arguments of tool and calls it.
func (h *toolsHandler) call(ctx context.Context, tools berth.ChildTools, tool string, r *http.Request, w http.ResponseWriter) (any, error) {
	switch tool {
	case berth.ToolSpawnChild:
		return callTool(h, w, r, func(a berth.SpawnChildArgs) (any, error) { return tools.SpawnChild(ctx, a) })
	case berth.ToolPromptChild:
		return callTool(h, w, r, func(a berth.PromptChildArgs) (any, error) { return tools.PromptChild(ctx, a) })
	case berth.ToolWaitChild:
		return callTool(h, w, r, func(a berth.WaitChildArgs) (any, error) { return tools.WaitChild(ctx, a) })
	case berth.ToolListChildren:
		return callTool(h, w, r, func(struct{}) (any, error) { return tools.ListChildren(ctx) })
	case berth.ToolStopChild:
		return callTool(h, w, r, func(a berth.ChildArgs) (any, error) { return tools.StopChild(ctx, a) })
	}
	return nil, berth.Errorf(berth.ENotFound, "no berth tool %q", tool)
}

// callTool decodes a tool's arguments, of type A, as strictly as the API
// does, and calls fn with them.
func callTool[A any](h *toolsHandler, w http.ResponseWriter, r *http.Request, fn func(A) (any, error)) (any, error) {
	var a A
	if err := decodeStrict(w, r, &a, h.maxBody); err != nil {
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
