package modelstub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// openaiRequest is what the stub reads of a chat-completions request.
type openaiRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []message `json:"messages"`
	Tools    []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

// serveOpenAI answers POST /v1/chat/completions.
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	var req openaiRequest
	if !decodeRequest(w, r, &req, `{"error":{"message":"bad json"}}`) {
		return
	}
	var texts []string
	toolResult := false
	if n := len(req.Messages); n > 0 {
		last := req.Messages[n-1]
		toolResult = last.Role == "tool"
		for _, p := range last.blocks() {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
	}
	var tools []tool
	for _, t := range req.Tools {
		tools = append(tools, tool{name: t.Function.Name, params: schemaParams(t.Function.Parameters)})
	}
	reply := decide(texts, toolResult, tools)
	s.record("openai", reply)

	id, created := s.nextID("chatcmpl-"), time.Now().Unix()
	message := map[string]any{"role": "assistant", "content": reply.Text}
	finish := "stop"
	var call map[string]any
	if reply.Tool != "" {
		args, _ := json.Marshal(reply.Args)
		call = map[string]any{"index": 0, "id": s.nextID("call_"), "type": "function",
			"function": map[string]any{"name": reply.Tool, "arguments": string(args)}}
		message = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": InputTokens + CacheReadTokens, "completion_tokens": OutputTokens,
		"total_tokens":          InputTokens + CacheReadTokens + OutputTokens,
		"prompt_tokens_details": map[string]int{"cached_tokens": CacheReadTokens}}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}}, "usage": usage})
		return
	}
	sse := newSSE(w)
	// As the API does: with stream_options.include_usage, every chunk has
	// a usage of null and one more chunk, with no choices, has the usage.
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if req.StreamOptions.IncludeUsage {
			c["usage"] = nil
		}
		return c
	}
	if call != nil {
		sse.event("", chunk(map[string]any{"role": "assistant", "tool_calls": []any{call}}, nil))
	} else {
		sse.event("", chunk(map[string]any{"role": "assistant", "content": reply.Text}, nil))
	}
	sse.event("", chunk(map[string]any{}, finish))
	if req.StreamOptions.IncludeUsage {
		last := chunk(nil, nil)
		last["choices"], last["usage"] = []any{}, usage
		sse.event("", last)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}
