package gateway

import "strings"

// AgentEnv is the environment that points an agent calling an upstream of
// kind at the gateway: baseURL is the upstream's root on the gateway
// (http://127.0.0.1:PORT/UPSTREAM), key the session's key (Register).
//
//	anthropic                 ANTHROPIC_BASE_URL=baseURL, ANTHROPIC_API_KEY=key
//	openai, openai-responses  OPENAI_BASE_URL=baseURL/v1, OPENAI_API_BASE (the
//	                          same, for older SDKs), OPENAI_API_KEY=key
//	gemini                    GOOGLE_GEMINI_BASE_URL=baseURL, GEMINI_API_KEY=key
//
// An unknown kind has none (nil).
func AgentEnv(kind Kind, baseURL, key string) map[string]string {
	url := AgentURL(kind, baseURL)
	switch {
	case kind == KindAnthropic:
		return map[string]string{"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": key}
	case kind.openAI():
		return map[string]string{"OPENAI_BASE_URL": url, "OPENAI_API_BASE": url, "OPENAI_API_KEY": key}
	case kind == KindGemini:
		return map[string]string{"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": key}
	}
	return nil
}

// AgentURL is the base URL an SDK of kind is given for the upstream whose
// root on the gateway is baseURL: the root itself, with /v1 for the
// OpenAI kinds (whose SDKs' base URLs hold the version).
func AgentURL(kind Kind, baseURL string) string {
	baseURL = strings.TrimSuffix(baseURL, "/")
	if kind.openAI() {
		return baseURL + "/v1"
	}
	return baseURL
}
