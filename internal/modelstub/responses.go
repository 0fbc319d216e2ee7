package modelstub

import (
	"encoding/json"
	"net/http"
	"strings"
)

// responsesRequest is what the stub reads of an OpenAI Responses API
// request (what Codex calls through a model_providers entry).
type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  []json.RawMessage `json:"input"`
}

// responsesItem is what the stub reads of one input item.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// serveResponses answers POST /v1/responses, streaming (as Codex asks) or
// not: text turns only.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if !decodeRequest(w, r, &req, `{"error":{"message":"bad json"}}`) {
		return
	}
	var texts []string
	toolResult := false
	if n := len(req.Input); n > 0 {
		var last responsesItem
		_ = json.Unmarshal(req.Input[n-1], &last)
		toolResult = strings.HasSuffix(last.Type, "_call_output")
		for i := n - 1; i >= 0 && !toolResult; i-- {
			var it responsesItem
			_ = json.Unmarshal(req.Input[i], &it)
			if it.Type != "message" || it.Role != "user" {
				continue
			}
			var parts []struct{ Type, Text string }
			_ = json.Unmarshal(it.Content, &parts)
			for _, p := range parts {
				texts = append(texts, p.Text)
			}
			break
		}
	}
	// No write tool yet: Codex's (apply_patch, or exec_command for models
	// it has no metadata for) differs by model; a write gets a text.
	reply := decide(texts, toolResult, nil)
	s.record("responses", reply)
	item := map[string]any{"type": "message", "id": s.nextID("msg_"), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}}
	id := s.nextID("resp_")
	usage := map[string]any{"input_tokens": InputTokens + CacheReadTokens,
		"input_tokens_details": map[string]int{"cached_tokens": CacheReadTokens}, "output_tokens": OutputTokens,
		"output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": InputTokens + CacheReadTokens + OutputTokens}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "response", "status": "completed",
			"model": req.Model, "output": []any{item}, "usage": usage})
		return
	}
	sse := newSSE(w)
	sse.event("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id, "usage": nil}})
	sse.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	sse.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": item["id"],
		"output_index": 0, "content_index": 0, "delta": reply.Text})
	sse.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse.event("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id,
		"output": []any{item}, "usage": usage}})
}
