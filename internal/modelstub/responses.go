package modelstub

import (
	"encoding/json"
	"net/http"
	"strings"
)

// responsesRequest is what the stub reads of an OpenAI Responses API
// request (what Codex calls through a model_providers entry, and
// OpenCode's openai provider).
type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  []json.RawMessage `json:"input"`
	Tools  []responsesTool   `json:"tools"`
}

// responsesItem is what the stub reads of one input item. Codex offers
// its tools in an input item of type additional_tools.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Tools   []responsesTool `json:"tools"`
}

// responsesTool is one tool a Responses request offers: a function (JSON
// arguments), a custom tool (freeform input) or a namespace of tools.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Tools       []responsesTool `json:"tools"`
}

// flatten lists ts with the tools of their namespaces, each with the
// namespace it is in ("" at the top).
func flattenTools(ts []responsesTool, namespace string, out map[string]responsesTool, spaces map[string]string) {
	for _, t := range ts {
		if t.Type == "namespace" {
			flattenTools(t.Tools, t.Name, out, spaces)
			continue
		}
		if _, ok := out[t.Name]; !ok {
			out[t.Name], spaces[t.Name] = t, namespace
		}
	}
}

// applyPatch is Codex's patch that adds file path with content.
func applyPatch(path, content string) string {
	return "*** Begin Patch\n*** Add File: " + path + "\n+" + content + "\n*** End Patch\n"
}

// patchWrite is the stub's call, among the tools of an agent that writes
// by patches (Codex, and OpenCode on an OpenAI model), that writes path
// with content: apply_patch when it is offered itself; else Codex's code
// mode, whose exec tool runs JavaScript that calls the nested
// tools.apply_patch. ok is false when neither is there.
func patchWrite(tools map[string]responsesTool, path, content string) (Reply, bool) {
	patch := applyPatch(path, content)
	if t, ok := tools["apply_patch"]; ok {
		if t.Type == "custom" {
			return Reply{Tool: "apply_patch", Input: patch}, true
		}
		// Its one argument: "input" (Codex), "patchText" (OpenCode).
		arg := "input"
		if ps := schemaParams(t.Parameters); len(ps) == 1 {
			arg = ps[0]
		}
		return Reply{Tool: "apply_patch", Args: map[string]any{arg: patch}}, true
	}
	if t, ok := tools["exec"]; ok && t.Type == "custom" && strings.Contains(t.Description, "apply_patch") {
		js, _ := json.Marshal(patch)
		return Reply{Tool: "exec", Input: "const r = await tools.apply_patch(" + string(js) + ");\ntext(r);\n"}, true
	}
	return Reply{}, false
}

// serveResponses answers POST /v1/responses, streaming (as Codex and
// OpenCode ask) or not.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	if !decodeRequest(w, r, &req, `{"error":{"message":"bad json"}}`) {
		return
	}
	offered, spaces := map[string]responsesTool{}, map[string]string{}
	flattenTools(req.Tools, "", offered, spaces)
	var texts []string
	toolResult := false
	for _, raw := range req.Input {
		var it responsesItem
		if json.Unmarshal(raw, &it) == nil && it.Type == "additional_tools" {
			flattenTools(it.Tools, "", offered, spaces)
		}
	}
	if n := len(req.Input); n > 0 {
		var last responsesItem
		_ = json.Unmarshal(req.Input[n-1], &last)
		toolResult = strings.HasSuffix(last.Type, "_call_output")
		for i := n - 1; i >= 0 && !toolResult; i-- {
			var it responsesItem
			_ = json.Unmarshal(req.Input[i], &it)
			// A message's type may be left out (OpenCode's SDK does).
			if it.Type != "message" && it.Type != "" || it.Role != "user" {
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
	var tools []tool
	for name, t := range offered {
		if t.Type == "function" {
			tools = append(tools, tool{name: name, params: schemaParams(t.Parameters)})
		}
	}
	reply := decide(texts, toolResult, tools)
	// Codex, and OpenCode on an OpenAI model, have no write tool of the
	// others' kind: they patch.
	if m := writeRequest().FindStringSubmatch(strings.Join(texts, "\n")); m != nil && !toolResult && reply.Tool == "" {
		if w, ok := patchWrite(offered, m[1], m[2]); ok {
			reply = w
		}
	}
	s.record("responses", reply)
	item := map[string]any{"type": "message", "id": s.nextID("msg_"), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}}
	switch {
	case reply.Tool != "" && reply.Args != nil:
		args, _ := json.Marshal(reply.Args)
		item = map[string]any{"type": "function_call", "id": s.nextID("fc_"), "call_id": s.nextID("call_"),
			"name": reply.Tool, "arguments": string(args), "status": "completed"}
	case reply.Tool != "":
		item = map[string]any{"type": "custom_tool_call", "id": s.nextID("ctc_"), "call_id": s.nextID("call_"),
			"name": reply.Tool, "input": reply.Input, "status": "completed"}
	}
	if ns := spaces[reply.Tool]; reply.Tool != "" && ns != "" {
		item["namespace"] = ns
	}
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
	if reply.Tool == "" {
		sse.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": item["id"],
			"output_index": 0, "content_index": 0, "delta": reply.Text})
	}
	sse.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse.event("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": id,
		"output": []any{item}, "usage": usage}})
}
