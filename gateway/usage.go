package gateway

import (
	"encoding/json"
	"mime"
	"time"
)

// Call is what the gateway tells of one model call it forwarded: never
// the prompt or the answer.
type Call struct {
	// Upstream is the upstream's name.
	Upstream string
	// Model is the model the request named ("" when it named none the
	// gateway could read).
	Model string
	// Status is the upstream's HTTP status; or the gateway's own when it
	// answered instead (413: the body was too large, 502: the upstream
	// could not be reached); or 499 when the agent went away before an
	// answer came.
	Status int
	// Tokens, as the upstream counted them. InputTokens are the input
	// tokens not read from a cache (for OpenAI and Gemini, the prompt's
	// count less the cached count); OutputTokens include thinking.
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// CostUSD is the tokens priced at the upstream's prices.
	CostUSD float64
	// Duration is from the call's arrival to the end of its answer;
	// FirstByte to the first byte of the answer's body (0: none came).
	Duration  time.Duration
	FirstByte time.Duration
}

// api is which model API a call is, for reading its usage.
type api uint8

const (
	apiNone      api = iota // not a model call (a list of models, a count of tokens)
	apiMessages             // Anthropic Messages
	apiChat                 // OpenAI Chat Completions (also completions, embeddings)
	apiResponses            // OpenAI Responses
	apiGemini               // Gemini generateContent, streamGenerateContent
)

// usage is a call's token counts, as Call has them.
type usage struct {
	input, output, cacheRead, cacheWrite int64
}

// usagePaths are, per API, the key paths of an answer where its usage is:
// in the answer (non-streaming) or in its events (streaming).
var usagePaths = map[api][][]string{
	// usage: the answer, and message_delta; message.usage: message_start.
	apiMessages: {{"usage"}, {"message", "usage"}},
	// usage: the answer, and the last chunk of a stream.
	apiChat: {{"usage"}},
	// usage: the answer; response.usage: response.completed (and
	// response.incomplete, response.failed).
	apiResponses: {{"usage"}, {"response", "usage"}},
	// usageMetadata: the answer, and every chunk of a stream.
	apiGemini: {{"usageMetadata"}},
}

// meter reads a call's usage from its answer as the answer passes, never
// holding more of it than one usage object.
type meter struct {
	api api
	u   usage
	sc  *scanner
	sse *sseReader // set for an event stream
}

// newMeter returns a meter of an answer to a call of a whose content type
// is contentType.
func newMeter(a api, contentType string) *meter {
	m := &meter{api: a}
	m.sc = newScanner(usagePaths[a], m.found)
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "text/event-stream" {
		m.sse = &sseReader{sc: m.sc}
	}
	return m
}

// feed follows p, the next piece of the answer.
func (m *meter) feed(p []byte) {
	if m.sse != nil {
		m.sse.feed(p)
		return
	}
	m.sc.feed(p)
}

// found reads one usage object.
func (m *meter) found(_ int, raw []byte, _, _ int64) {
	if len(raw) == 0 || raw[0] != '{' {
		// null (every chunk but the last of an OpenAI stream), or too large.
		return
	}
	switch m.api {
	case apiMessages:
		var v struct {
			Input      *int64 `json:"input_tokens"`
			Output     *int64 `json:"output_tokens"`
			CacheWrite *int64 `json:"cache_creation_input_tokens"`
			CacheRead  *int64 `json:"cache_read_input_tokens"`
		}
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		// message_start has them all (output so far); message_delta the
		// counts that changed, cumulative: the later one wins, field by field.
		set(&m.u.input, v.Input)
		set(&m.u.output, v.Output)
		set(&m.u.cacheWrite, v.CacheWrite)
		set(&m.u.cacheRead, v.CacheRead)
	case apiChat:
		var v struct {
			Prompt     int64 `json:"prompt_tokens"`
			Completion int64 `json:"completion_tokens"`
			Details    struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		m.u = cachedOf(v.Prompt, v.Details.Cached, v.Completion)
	case apiResponses:
		var v struct {
			Input   int64 `json:"input_tokens"`
			Output  int64 `json:"output_tokens"`
			Details struct {
				Cached int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		}
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		m.u = cachedOf(v.Input, v.Details.Cached, v.Output)
	case apiGemini:
		var v struct {
			Prompt     int64 `json:"promptTokenCount"`
			Candidates int64 `json:"candidatesTokenCount"`
			Cached     int64 `json:"cachedContentTokenCount"`
			Thoughts   int64 `json:"thoughtsTokenCount"`
		}
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		// Each chunk's counts are the call's so far: the last one wins.
		m.u = cachedOf(v.Prompt, v.Cached, v.Candidates+v.Thoughts)
	}
}

// set sets *dst to *v when the field was there (and not negative).
func set(dst *int64, v *int64) {
	if v != nil {
		*dst = max(*v, 0)
	}
}

// cachedOf is the usage of a call whose prompt of prompt tokens had
// cached of them read from the cache, and that answered output tokens.
func cachedOf(prompt, cached, output int64) usage {
	cached = min(max(cached, 0), max(prompt, 0))
	return usage{input: max(prompt, 0) - cached, cacheRead: cached, output: max(output, 0)}
}
