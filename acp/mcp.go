package acp

import "encoding/json"

// McpServer is one entry of mcpServers in session/new, session/load and
// session/resume: a stdio server (Command, Args, Env) when Type is "" or
// "stdio", else an "http" or "sse" server (URL, Headers). It marshals to
// the schema's shape for its transport, with the arrays the schema
// requires present even when empty.
type McpServer struct {
	Type    string
	Name    string
	Command string
	Args    []string
	Env     []EnvVariable
	URL     string
	Headers []HTTPHeader
}

// HTTPHeader is one header an http or sse MCP server is called with.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MarshalJSON implements json.Marshaler.
func (s McpServer) MarshalJSON() ([]byte, error) {
	if s.Type == "" || s.Type == "stdio" {
		return json.Marshal(struct {
			Name    string        `json:"name"`
			Command string        `json:"command"`
			Args    []string      `json:"args"`
			Env     []EnvVariable `json:"env"`
		}{s.Name, s.Command, orEmpty(s.Args), orEmpty(s.Env)})
	}
	return json.Marshal(struct {
		Type    string       `json:"type"`
		Name    string       `json:"name"`
		URL     string       `json:"url"`
		Headers []HTTPHeader `json:"headers"`
	}{s.Type, s.Name, s.URL, orEmpty(s.Headers)})
}

// orEmpty is s, or an empty slice for nil (JSON [] rather than null).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// McpCapabilities says which MCP transports beyond stdio (which every agent
// supports) the agent connects to.
type McpCapabilities struct {
	HTTP bool `json:"http"`
	SSE  bool `json:"sse"`
}

// Supports reports whether the agent offers transport ("stdio", "http",
// "sse").
func (c McpCapabilities) Supports(transport string) bool {
	switch transport {
	case "", "stdio":
		return true
	case "http":
		return c.HTTP
	case "sse":
		return c.SSE
	}
	return false
}
