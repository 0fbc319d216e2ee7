package gateway

import (
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-sh/berth"
)

// Kind is the API an upstream speaks: it decides how the real credential
// is added, the shape of the gateway's own error answers, and where the
// usage is read.
type Kind string

// The kinds of upstream (docs/api.md, The model gateway).
const (
	// KindAnthropic is the Anthropic Messages API.
	KindAnthropic Kind = "anthropic"
	// KindOpenAI is the OpenAI Chat Completions API, and any server that
	// speaks it (Ollama, vLLM, LM Studio). The Responses API is served on
	// it too.
	KindOpenAI Kind = "openai"
	// KindOpenAIResponses is an OpenAI upstream meant for agents that call
	// the Responses API (Codex); it is served exactly as KindOpenAI.
	KindOpenAIResponses Kind = "openai-responses"
	// KindGemini is the Gemini API (generateContent,
	// streamGenerateContent).
	KindGemini Kind = "gemini"
)

// Kinds lists every kind, in the order docs/api.md gives them.
var Kinds = []Kind{KindAnthropic, KindOpenAI, KindOpenAIResponses, KindGemini}

// valid reports whether k is a kind the gateway serves.
func (k Kind) valid() bool {
	switch k {
	case KindAnthropic, KindOpenAI, KindOpenAIResponses, KindGemini:
		return true
	}
	return false
}

// openAI reports whether k speaks the OpenAI APIs.
func (k Kind) openAI() bool { return k == KindOpenAI || k == KindOpenAIResponses }

// DefaultURL is the provider's public API for kind ("" for an unknown
// kind).
func DefaultURL(kind Kind) string {
	switch kind {
	case KindAnthropic:
		return "https://api.anthropic.com"
	case KindOpenAI, KindOpenAIResponses:
		return "https://api.openai.com"
	case KindGemini:
		return "https://generativelanguage.googleapis.com"
	}
	return ""
}

// Prices are what an upstream's tokens cost, in US dollars per million
// tokens. Zero prices make every call cost 0 (tokens are still counted).
type Prices struct {
	// Input prices the input tokens not read from a cache.
	Input float64
	// Output prices the output tokens (thinking included).
	Output float64
	// CacheRead prices the input tokens read from the provider's prompt
	// cache (OpenAI's cached_tokens, Gemini's cachedContentTokenCount).
	CacheRead float64
	// CacheWrite prices the input tokens written to the cache (Anthropic's
	// cache_creation_input_tokens).
	CacheWrite float64
}

// cost is the price of u in US dollars.
func (p Prices) cost(u usage) float64 {
	return (float64(u.input)*p.Input + float64(u.output)*p.Output +
		float64(u.cacheRead)*p.CacheRead + float64(u.cacheWrite)*p.CacheWrite) / 1e6
}

// Upstream is one model API the gateway forwards to: a `[[models]]` entry
// of the configuration, or a built-in.
type Upstream struct {
	// Name is the first segment of the gateway's path that reaches it
	// (/NAME/v1/messages): 1 to 64 of a-z, 0-9 and '-'.
	Name string
	// Kind is the API it speaks.
	Kind Kind
	// URL is where it is: http or https, with an optional path prefix the
	// agent's path is appended to (empty: DefaultURL(Kind)).
	URL string
	// Credential names the credential added to each call ("" for an
	// upstream that needs none, such as a local Ollama).
	Credential string
	// Prices price its tokens.
	Prices Prices
	// Headers are added to every call to it (after the agent's, replacing
	// any of the same name).
	Headers map[string]string
}

// Builtins are the upstreams every daemon has: anthropic, openai and
// gemini, at the providers' public APIs, each with the credential of its
// own name and no prices.
func Builtins() []Upstream {
	return []Upstream{
		{Name: "anthropic", Kind: KindAnthropic, URL: DefaultURL(KindAnthropic), Credential: "anthropic"},
		{Name: "openai", Kind: KindOpenAI, URL: DefaultURL(KindOpenAI), Credential: "openai"},
		{Name: "gemini", Kind: KindGemini, URL: DefaultURL(KindGemini), Credential: "gemini"},
	}
}

// Resolve returns the table of upstreams: the built-ins, each replaced by
// a configured entry of the same name, then the other configured entries
// in their order. A configured entry without a URL gets its kind's
// DefaultURL; one that replaces a built-in without naming a credential
// keeps the built-in's. Every entry is checked (Validate); an error names
// the entry as models[i] and the field, with code berth.EInvalid.
func Resolve(configured []Upstream) ([]Upstream, error) {
	table := Builtins()
	builtin := len(table)
	seen := map[string]int{}
	for i, u := range configured {
		if j, dup := seen[u.Name]; dup {
			return nil, berth.Errorf(berth.EInvalid, "models[%d].name: %q is also models[%d]'s", i, u.Name, j)
		}
		seen[u.Name] = i
		if u.URL == "" {
			u.URL = DefaultURL(u.Kind)
		}
		if err := u.Validate(); err != nil {
			return nil, berth.WrapError(berth.EInvalid, err, "models[%d].%s", i, berth.ErrorMessage(err))
		}
		k := 0
		for k < builtin && table[k].Name != u.Name {
			k++
		}
		if k == builtin {
			table = append(table, u)
			continue
		}
		if u.Credential == "" {
			u.Credential = table[k].Credential
		}
		table[k] = u
	}
	return table, nil
}

// Validate checks u: a name of a-z, 0-9 and '-', a known kind, an http or
// https URL with a host and no user, query or fragment, a credential name
// of a-z, 0-9, '-', '_' and '.', prices that are finite and not negative,
// and headers that are valid and not about the connection. Its message
// starts with the field ("url: …"); the code is berth.EInvalid.
func (u Upstream) Validate() error {
	if !validName(u.Name, false) {
		return berth.Errorf(berth.EInvalid, "name: %q is not 1 to 64 of a-z, 0-9 and '-'", u.Name)
	}
	if !u.Kind.valid() {
		return berth.Errorf(berth.EInvalid, "kind: %q is none of anthropic, openai, openai-responses, gemini", u.Kind)
	}
	if err := validURL(u.URL); err != nil {
		return err
	}
	if u.Credential != "" && !validName(u.Credential, true) {
		return berth.Errorf(berth.EInvalid, "credential: %q is not 1 to 64 of a-z, 0-9, '-', '_' and '.'", u.Credential)
	}
	for field, p := range map[string]float64{"input": u.Prices.Input, "output": u.Prices.Output,
		"cache_read": u.Prices.CacheRead, "cache_write": u.Prices.CacheWrite} {
		if p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
			return berth.Errorf(berth.EInvalid, "prices.%s: %v is not a price (US dollars per million tokens, 0 or more)", field, p)
		}
	}
	for name, value := range u.Headers {
		if err := validHeader(name, value); err != nil {
			return err
		}
	}
	return nil
}

// validName reports whether s is 1 to 64 of a-z, 0-9 and '-' (and '_',
// '.' when loose).
func validName(s string, loose bool) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		ok := 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || loose && (c == '_' || c == '.')
		if !ok {
			return false
		}
	}
	return true
}

// validURL checks an upstream's URL.
func validURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return berth.Errorf(berth.EInvalid, "url: %q is not a URL", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return berth.Errorf(berth.EInvalid, "url: %q is not http or https", s)
	case u.Host == "":
		return berth.Errorf(berth.EInvalid, "url: %q has no host", s)
	case u.User != nil:
		return berth.Errorf(berth.EInvalid, "url: a URL must not hold a user or password (name a credential instead)")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return berth.Errorf(berth.EInvalid, "url: %q must not have a query or fragment", s)
	}
	return nil
}

// connectionHeaders are headers an upstream's configuration may not set:
// they belong to the connection, not to the call.
var connectionHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade",
	"Te", "Trailer", "Keep-Alive", "Proxy-Connection", "Content-Encoding"}

// validHeader checks one configured header.
func validHeader(name, value string) error {
	if name == "" || strings.ContainsFunc(name, func(c rune) bool {
		return c <= ' ' || c >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c)
	}) {
		return berth.Errorf(berth.EInvalid, "headers: %q is not a header name", name)
	}
	for _, h := range connectionHeaders {
		if http.CanonicalHeaderKey(name) == h {
			return berth.Errorf(berth.EInvalid, "headers: %s belongs to the connection; it cannot be set", h)
		}
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return berth.Errorf(berth.EInvalid, "headers: the value of %s holds a line break or NUL", name)
	}
	return nil
}
