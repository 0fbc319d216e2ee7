package gateway

import (
	"net/http"
	"path"
	"strings"
)

// splitUpstream splits a gateway path into the upstream's name and the
// path on the upstream: "/anthropic/v1/messages" is "anthropic",
// "/v1/messages".
func splitUpstream(p string) (name, rest string) {
	p = strings.TrimPrefix(p, "/")
	name, rest, _ = strings.Cut(p, "/")
	return name, "/" + rest
}

// route says which API a call of method on path p of an upstream of kind
// is, and the model when the path names it (Gemini). ok is false for a
// call the gateway does not serve: it serves the model APIs only, so that
// the user's key reaches nothing else of the provider's (files, batches,
// fine-tuning, the organization).
func route(kind Kind, method, p string) (a api, model string, ok bool) {
	// Exact paths only: no "..", no empty or trailing segment.
	if p != path.Clean(p) {
		return apiNone, "", false
	}
	post, get := method == http.MethodPost, method == http.MethodGet
	switch {
	case kind == KindAnthropic:
		switch {
		case post && p == "/v1/messages":
			return apiMessages, "", true
		case post && p == "/v1/messages/count_tokens", get && models(p, "/v1"):
			return apiNone, "", true
		}
	case kind.openAI():
		// OpenAI-compatible servers are reached with or without /v1.
		q := strings.TrimPrefix(p, "/v1")
		switch {
		case post && (q == "/chat/completions" || q == "/completions" || q == "/embeddings"):
			return apiChat, "", true
		case post && (q == "/responses" || q == "/responses/compact"):
			return apiResponses, "", true
		case post && q == "/responses/input_tokens", get && models(q, ""):
			return apiNone, "", true
		}
	case kind == KindGemini:
		return geminiRoute(method, p)
	}
	return apiNone, "", false
}

// models reports whether p is prefix+"/models" or prefix+"/models/ID".
func models(p, prefix string) bool {
	rest, ok := strings.CutPrefix(p, prefix+"/models")
	return ok && (rest == "" || rest[0] == '/' && !strings.Contains(rest[1:], "/"))
}

// geminiRoute is route for Gemini: /VERSION/models/MODEL:METHOD.
func geminiRoute(method, p string) (api, string, bool) {
	version, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if version != "v1" && version != "v1beta" && version != "v1alpha" {
		return apiNone, "", false
	}
	if method == http.MethodGet && models("/"+rest, "") {
		return apiNone, "", true
	}
	model, verb, ok := strings.Cut(strings.TrimPrefix(rest, "models/"), ":")
	if method != http.MethodPost || !strings.HasPrefix(rest, "models/") || !ok || model == "" || strings.Contains(model, "/") {
		return apiNone, "", false
	}
	switch verb {
	case "generateContent", "streamGenerateContent":
		return apiGemini, model, true
	case "countTokens", "embedContent", "batchEmbedContents":
		return apiNone, model, true
	}
	return apiNone, "", false
}
