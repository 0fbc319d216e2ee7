package gateway

import "testing"

// The routes of each kind, and what the gateway makes of them.
func TestRoute(t *testing.T) {
	for _, c := range []struct {
		kind         Kind
		method, path string
		api          api
		model        string
		ok           bool
	}{
		{KindAnthropic, "POST", "/v1/messages", apiMessages, "", true},
		{KindAnthropic, "POST", "/v1/messages/count_tokens", apiNone, "", true},
		{KindAnthropic, "GET", "/v1/models/claude-x", apiNone, "", true},
		{KindAnthropic, "GET", "/v1/models/a/b", apiNone, "", false},
		{KindAnthropic, "POST", "/v1/chat/completions", apiNone, "", false},
		{KindAnthropic, "POST", "/v1//messages", apiNone, "", false},
		{KindOpenAI, "POST", "/v1/chat/completions", apiChat, "", true},
		{KindOpenAI, "POST", "/chat/completions", apiChat, "", true},
		{KindOpenAI, "POST", "/v1/embeddings", apiChat, "", true},
		{KindOpenAI, "POST", "/v1/responses", apiResponses, "", true},
		{KindOpenAIResponses, "POST", "/v1/responses/compact", apiResponses, "", true},
		{KindOpenAIResponses, "POST", "/v1/chat/completions", apiChat, "", true},
		{KindOpenAI, "GET", "/v1/models", apiNone, "", true},
		{KindOpenAI, "POST", "/v1/files", apiNone, "", false},
		{KindOpenAI, "POST", "/v1/messages", apiNone, "", false},
		{KindGemini, "POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", apiGemini, "gemini-2.5-pro", true},
		{KindGemini, "POST", "/v1/models/g:generateContent", apiGemini, "g", true},
		{KindGemini, "POST", "/v1beta/models/g:countTokens", apiNone, "g", true},
		{KindGemini, "GET", "/v1beta/models", apiNone, "", true},
		{KindGemini, "POST", "/v1beta/models/g:predict", apiNone, "", false},
		{KindGemini, "POST", "/v1beta/models/:generateContent", apiNone, "", false},
		{KindGemini, "POST", "/v2/models/g:generateContent", apiNone, "", false},
		{KindGemini, "POST", "/v1beta/cachedContents", apiNone, "", false},
		{KindGemini, "POST", "/v1beta/models/../files:generateContent", apiNone, "", false},
	} {
		a, model, ok := route(c.kind, c.method, c.path)
		if a != c.api || model != c.model || ok != c.ok {
			t.Errorf("%s %s %s: %v %q %v, want %v %q %v", c.kind, c.method, c.path, a, model, ok, c.api, c.model, c.ok)
		}
	}
}
