package modelstub

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// anthropicRequest is what the stub reads of a Messages API request.
type anthropicRequest struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// serveAnthropic answers POST /v1/messages.
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	var req anthropicRequest
	if !decodeRequest(w, r, &req, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`) {
		return
	}
	var texts []string
	toolResult := false
	// The last user message: Claude Code may send a message of context
	// (role "system") after it.
	last := len(req.Messages) - 1
	for last >= 0 && req.Messages[last].Role != "user" {
		last--
	}
	if last >= 0 {
		for _, b := range req.Messages[last].blocks() {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_result":
				toolResult = true
			}
		}
	}
	var tools []tool
	for _, t := range req.Tools {
		tools = append(tools, tool{name: t.Name, params: schemaParams(t.InputSchema)})
	}
	reply := decide(texts, toolResult, tools)
	s.record("anthropic", reply)

	content := map[string]any{"type": "text", "text": reply.Text}
	stop := "end_turn"
	if reply.Tool != "" {
		content = map[string]any{"type": "tool_use", "id": s.nextID("toolu_"), "name": reply.Tool, "input": reply.Args}
		stop = "tool_use"
	}
	msg := map[string]any{"id": s.nextID("msg_"), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{content}, "stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(OutputTokens)}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
		return
	}
	sse := newSSE(w)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	// As the API does: message_start has the input's counts and the
	// output's so far, message_delta the output's at the end.
	start["content"], start["stop_reason"], start["usage"] = []any{}, nil, anthropicUsage(1)
	sse.event("message_start", map[string]any{"type": "message_start", "message": start})
	if reply.Tool != "" {
		args, _ := json.Marshal(reply.Args)
		block := map[string]any{"type": "tool_use", "id": content["id"], "name": reply.Tool, "input": map[string]any{}}
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": block})
		sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
	} else {
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": reply.Text}})
	}
	sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": OutputTokens}})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

// anthropicUsage is a Messages API usage of output tokens.
func anthropicUsage(output int) map[string]int {
	return map[string]int{"input_tokens": InputTokens, "cache_creation_input_tokens": CacheWriteTokens,
		"cache_read_input_tokens": CacheReadTokens, "output_tokens": output}
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
}

// newSSE starts an event stream on w.
func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

// event writes one event (name "" for a data-only event) holding v as JSON.
func (s *sse) event(name string, v any) {
	b, _ := json.Marshal(v)
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
