package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// answerError writes the gateway's own answer to a call: status and msg,
// in the error format of the upstream's kind, so that the agent's SDK
// shows msg as it shows the provider's errors. kind "" (no upstream) takes
// Anthropic's format, whose error.message every SDK reads. A refusal the
// agent must not retry (all but 5xx) says so in x-should-retry, which the
// Anthropic and OpenAI SDKs follow.
func answerError(w http.ResponseWriter, kind Kind, status int, msg string) {
	var body any
	switch {
	case kind.openAI():
		typ, code := openAIError(status)
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	case kind == KindGemini:
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}}
	default:
		body = map[string]any{"type": "error", "error": map[string]any{"type": anthropicError(status), "message": msg}}
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if status < 500 {
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// anthropicError is the Anthropic error type of status.
func anthropicError(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	return "api_error"
}

// openAIError is the OpenAI error type and code of status. A spent budget
// is insufficient_quota, OpenAI's own answer for a spent quota.
func openAIError(status int) (typ string, code any) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusNotFound:
		return "invalid_request_error", "not_found"
	case http.StatusRequestEntityTooLarge:
		return "invalid_request_error", "request_too_large"
	case http.StatusTooManyRequests:
		return "insufficient_quota", "insufficient_quota"
	}
	if status >= 500 {
		return "server_error", nil
	}
	return "invalid_request_error", nil
}

// geminiStatus is the google.rpc status name of status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return "UNAVAILABLE"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}
