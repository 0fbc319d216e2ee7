package berth

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// MCP server transports (docs/api.md, "User MCP servers"). stdio is the one
// every ACP agent must support; http and sse only when the agent's
// mcpCapabilities offer them.
const (
	MCPStdio = "stdio"
	MCPHTTP  = "http"
	MCPSSE   = "sse"
)

// Bounds of a session's mcp_servers. They keep a create body, the stored
// session and the agent's session/new small whatever a caller sends.
const (
	MaxMCPServers     = 16
	maxMCPNameBytes   = 64
	maxMCPStringBytes = 4096
	maxMCPListItems   = 64
	maxMCPTotalBytes  = 64 << 10
)

// MCPReservedName is the name of berth's own MCP server (the `berth` tools
// of docs/api.md, "The berth MCP server: agents spawn children"): no user
// server may take it.
const MCPReservedName = "berth"

// RedactedValue stands for the value of an MCP server's env variable or
// header wherever a session is shown: those values are secrets.
const RedactedValue = "[redacted]"

// MCPServer is one MCP server a session's agent is given in ACP
// `mcpServers`: a stdio server the agent starts (Command, Args, Env), or an
// http/sse server it connects to (URL, Headers). Env and Headers values are
// secrets: stored with the session, sent to the agent, never shown back.
type MCPServer struct {
	Name string `json:"name"`
	// Type is "stdio" (or empty, the same), "http" or "sse".
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Transport is the server's transport: MCPStdio, MCPHTTP or MCPSSE.
func (s MCPServer) Transport() string {
	if s.Type == "" {
		return MCPStdio
	}
	return s.Type
}

// Equal reports whether two servers are the same server: same name,
// transport, command line, URL, env and headers (values included).
func (s MCPServer) Equal(o MCPServer) bool {
	return s.Name == o.Name && s.Transport() == o.Transport() && s.Command == o.Command &&
		slices.Equal(s.Args, o.Args) && s.URL == o.URL && maps.Equal(s.Env, o.Env) && maps.Equal(s.Headers, o.Headers)
}

// MCPServers is a session's list of user MCP servers. Marshalled to JSON
// (the Session over the API, the event stream, the CLI) it redacts every
// env and header value; the store keeps them whole.
type MCPServers []MCPServer

// Contains reports whether the list holds a server Equal to s: a child
// session may be given only servers its parent was given.
func (l MCPServers) Contains(s MCPServer) bool {
	return slices.ContainsFunc(l, s.Equal)
}

// Find returns the server named name.
func (l MCPServers) Find(name string) (MCPServer, bool) {
	i := slices.IndexFunc(l, func(s MCPServer) bool { return s.Name == name })
	if i < 0 {
		return MCPServer{}, false
	}
	return l[i], true
}

// Redacted returns a copy whose env and header values are RedactedValue.
func (l MCPServers) Redacted() MCPServers {
	if l == nil {
		return nil
	}
	out := make(MCPServers, len(l))
	for i, s := range l {
		s.Args = slices.Clone(s.Args)
		s.Env, s.Headers = redactValues(s.Env), redactValues(s.Headers)
		out[i] = s
	}
	return out
}

// redactValues keeps m's keys and hides its values.
func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = RedactedValue
	}
	return out
}

// MarshalJSON writes the list with its secrets redacted.
func (l MCPServers) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("null"), nil
	}
	return json.Marshal([]MCPServer(l.Redacted()))
}

// Validate checks a list of MCP servers and sets each stdio server's Type
// to "stdio": names non-empty, unique and not MCPReservedName; a stdio
// server has a command and no url or headers; an http or sse server has an
// http(s) URL without credentials and no command, args or env; every list
// and string is bounded. The error is EInvalid with details.field naming
// the offending field ("mcp_servers[1].url").
func (l MCPServers) Validate() error {
	if len(l) > MaxMCPServers {
		return mcpInvalid("mcp_servers", "at most %d MCP servers", MaxMCPServers)
	}
	seen := map[string]int{}
	total := 0
	for i := range l {
		s := &l[i]
		at := fmt.Sprintf("mcp_servers[%d]", i)
		if err := validMCPName(at, s.Name); err != nil {
			return err
		}
		if j, dup := seen[s.Name]; dup {
			return mcpInvalid(at+".name", "mcp_servers[%d] and mcp_servers[%d] are both named %q: names must be unique", j, i, s.Name)
		}
		seen[s.Name] = i
		var err error
		switch s.Type {
		case "", MCPStdio:
			s.Type = MCPStdio
			err = validStdio(at, s)
		case MCPHTTP, MCPSSE:
			err = validRemote(at, s)
		default:
			err = mcpInvalid(at+".type", "%s.type must be stdio, http or sse, not %q", at, s.Type)
		}
		if err != nil {
			return err
		}
		total += s.size()
	}
	if total > maxMCPTotalBytes {
		return mcpInvalid("mcp_servers", "mcp_servers hold %d bytes, more than %d", total, maxMCPTotalBytes)
	}
	return nil
}

// size is the number of bytes of the server's strings.
func (s *MCPServer) size() int {
	n := len(s.Name) + len(s.Type) + len(s.Command) + len(s.URL)
	for _, a := range s.Args {
		n += len(a)
	}
	for k, v := range s.Env {
		n += len(k) + len(v)
	}
	for k, v := range s.Headers {
		n += len(k) + len(v)
	}
	return n
}

// validMCPName checks a server name: it names the server in the agent's
// tool names and in the demo agent's `mcp SERVER …`, so it is one plain word.
func validMCPName(at, name string) error {
	if name == "" {
		return mcpInvalid(at+".name", "%s.name is required", at)
	}
	if len(name) > maxMCPNameBytes {
		return mcpInvalid(at+".name", "%s.name is longer than %d bytes", at, maxMCPNameBytes)
	}
	for i, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || i > 0 && (c == '_' || c == '-' || c == '.')) {
			return mcpInvalid(at+".name", "%s.name %q must be letters, digits, '_', '-' and '.', starting with a letter or digit", at, name)
		}
	}
	if name == MCPReservedName {
		return mcpInvalid(at+".name", "%s.name %q is reserved for berth's own MCP server", at, name)
	}
	return nil
}

// validStdio checks the fields of a stdio server.
func validStdio(at string, s *MCPServer) error {
	switch {
	case strings.TrimSpace(s.Command) == "":
		return mcpInvalid(at+".command", "%s.command is required for a stdio server", at)
	case s.URL != "":
		return mcpInvalid(at+".url", "%s.url is for http and sse servers; a stdio server has a command", at)
	case len(s.Headers) > 0:
		return mcpInvalid(at+".headers", "%s.headers are for http and sse servers; a stdio server takes env", at)
	}
	if err := validMCPString(at+".command", s.Command); err != nil {
		return err
	}
	if len(s.Args) > maxMCPListItems {
		return mcpInvalid(at+".args", "%s.args has more than %d items", at, maxMCPListItems)
	}
	for j, a := range s.Args {
		if err := validMCPString(fmt.Sprintf("%s.args[%d]", at, j), a); err != nil {
			return err
		}
	}
	if len(s.Env) > maxMCPListItems {
		return mcpInvalid(at+".env", "%s.env has more than %d variables", at, maxMCPListItems)
	}
	for k, v := range s.Env {
		if !validEnvName(k) {
			return mcpInvalid(at+".env", "%s.env name %q is not valid", at, k)
		}
		if err := validMCPString(at+".env."+k, v); err != nil {
			return err
		}
	}
	return nil
}

// validRemote checks the fields of an http or sse server.
func validRemote(at string, s *MCPServer) error {
	switch {
	case s.Command != "" || len(s.Args) > 0:
		return mcpInvalid(at+".command", "%s is an %s server: command and args are for stdio servers", at, s.Type)
	case len(s.Env) > 0:
		return mcpInvalid(at+".env", "%s is an %s server: env is for stdio servers; send secrets as headers", at, s.Type)
	case s.URL == "":
		return mcpInvalid(at+".url", "%s.url is required for an %s server", at, s.Type)
	case len(s.URL) > maxMCPStringBytes:
		return mcpInvalid(at+".url", "%s.url is longer than %d bytes", at, maxMCPStringBytes)
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return mcpInvalid(at+".url", "%s.url must be an absolute http:// or https:// URL", at)
	}
	if u.User != nil {
		return mcpInvalid(at+".url", "%s.url must not hold credentials: the URL is shown back; send them as headers", at)
	}
	if len(s.Headers) > maxMCPListItems {
		return mcpInvalid(at+".headers", "%s.headers has more than %d headers", at, maxMCPListItems)
	}
	for k, v := range s.Headers {
		if !validHeaderName(k) {
			return mcpInvalid(at+".headers", "%s.headers name %q is not a valid HTTP header name", at, k)
		}
		if !validHeaderValue(v) || len(v) > maxMCPStringBytes {
			return mcpInvalid(at+".headers", "%s.headers value of %q is not a valid HTTP header value", at, k)
		}
	}
	return nil
}

// validMCPString refuses a NUL (no command line or environment can hold
// one) and a string over maxMCPStringBytes.
func validMCPString(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return mcpInvalid(field, "%s must not contain a NUL byte", field)
	}
	if len(v) > maxMCPStringBytes {
		return mcpInvalid(field, "%s is longer than %d bytes", field, maxMCPStringBytes)
	}
	return nil
}

// mcpInvalid is the EInvalid error naming field.
func mcpInvalid(field, format string, args ...any) error {
	return &Error{Code: EInvalid, Message: fmt.Sprintf(format, args...), Details: map[string]any{"field": field}}
}

// validEnvName reports whether s can name an environment variable:
// [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(s string) bool {
	for i, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// validHeaderName reports whether k is an HTTP field name: a token of
// RFC 9110 (letters, digits and !#$%&'*+-.^_`|~). Written here rather than
// taken from x/net's httpguts, whose idna import would put x/text in
// every program that links this package (the small shim among them).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v may be an HTTP field value: no
// control character but a tab (so no CR or LF to split the header).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
