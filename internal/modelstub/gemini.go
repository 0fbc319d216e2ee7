package modelstub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// geminiRequest is what the stub reads of a generateContent request.
type geminiRequest struct {
	Contents []struct {
		Role  string `json:"role"`
		Parts []struct {
			Text             string          `json:"text"`
			FunctionResponse json.RawMessage `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string          `json:"name"`
			Parameters           json.RawMessage `json:"parameters"`
			ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

// serveGemini answers POST /VERSION/models/MODEL:generateContent and
// :streamGenerateContent, the stream as server-sent events (?alt=sse, as
// Gemini CLI asks) or as a JSON array sent in pieces.
func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	model, method, _ := strings.Cut(path.Base(r.URL.Path), ":")
	var req geminiRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"code":400,"message":"bad json","status":"INVALID_ARGUMENT"}}`)
		return
	}
	var texts []string
	toolResult := false
	if n := len(req.Contents); n > 0 {
		for _, p := range req.Contents[n-1].Parts {
			if len(p.FunctionResponse) > 0 {
				toolResult = true
			} else if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
	}
	var tools []tool
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := f.Parameters
			if len(schema) == 0 {
				schema = f.ParametersJSONSchema
			}
			tools = append(tools, tool{name: f.Name, params: schemaParams(schema)})
		}
	}
	reply := decide(texts, toolResult, tools)
	s.record("gemini", reply)

	part := map[string]any{"text": reply.Text}
	if reply.Tool != "" {
		part = map[string]any{"functionCall": map[string]any{"name": reply.Tool, "args": reply.Args}}
	}
	answer := func(p map[string]any, finish string, output int) map[string]any {
		c := map[string]any{"content": map[string]any{"role": "model", "parts": []any{p}}, "index": 0}
		if finish != "" {
			c["finishReason"] = finish
		}
		return map[string]any{"candidates": []any{c}, "modelVersion": model, "usageMetadata": geminiUsage(output)}
	}
	if method != "streamGenerateContent" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer(part, "STOP", OutputTokens))
		return
	}
	// As the API does: every chunk has the usage so far; the last one, the
	// call's.
	chunks := []map[string]any{answer(part, "", 4), answer(map[string]any{"text": ""}, "STOP", OutputTokens)}
	if r.URL.Query().Get("alt") == "sse" {
		sse := newSSE(w)
		for _, c := range chunks {
			sse.event("", c)
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	for i, c := range chunks {
		b, _ := json.Marshal(c)
		sep := ",\r\n"
		if i == 0 {
			sep = "["
		}
		fmt.Fprintf(w, "%s%s", sep, b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	fmt.Fprint(w, "]")
}

// geminiUsage is a usageMetadata of output tokens (thoughts among them).
func geminiUsage(output int) map[string]int {
	thoughts := min(output, GeminiThoughtsTokens)
	return map[string]int{"promptTokenCount": InputTokens + CacheReadTokens, "cachedContentTokenCount": CacheReadTokens,
		"candidatesTokenCount": output - thoughts, "thoughtsTokenCount": thoughts,
		"totalTokenCount": InputTokens + CacheReadTokens + output}
}
