package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// maxModel bounds the model name the gateway reads from a request.
const maxModel = 256

// modelName is the JSON string raw as a model name, or "".
func modelName(raw []byte) string {
	var s string
	if len(raw) < 2 || raw[0] != '"' || len(raw) > maxModel || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// modelReader passes a request's body on as it is read and reads the
// model it names (top-level "model"; the last one, as the APIs read it).
// The transport reads the body on a goroutine of its own, which may still
// run when the answer has come: mu guards the reading.
type modelReader struct {
	io.ReadCloser
	mu    sync.Mutex
	sc    *scanner
	model string
}

// newModelReader reads the model of body.
func newModelReader(body io.ReadCloser) *modelReader {
	r := &modelReader{ReadCloser: body}
	r.sc = newScanner([][]string{{"model"}}, func(_ int, raw []byte, _, _ int64) {
		if m := modelName(raw); m != "" {
			r.model = m
		}
	})
	return r
}

// Read implements io.Reader.
func (r *modelReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.mu.Lock()
	r.sc.feed(p[:n])
	r.mu.Unlock()
	return n, err
}

// name is the model read so far.
func (r *modelReader) name() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.model
}

// Watched top-level keys of a Chat Completions request.
const (
	chatModel = iota
	chatStream
	chatStreamOptions
)

// span is where a value is in a body, and its bytes (nil when too large
// to keep).
type span struct {
	start, end int64
	raw        []byte
}

// chatRequest reads a Chat Completions request's body: the model it names
// and, when it asks for a stream, the body with
// stream_options.include_usage set to true (every stream_options it has,
// or one added first), so that the stream ends with the call's usage
// whatever the agent asked. Other bodies are returned as they are.
func chatRequest(body []byte) (out []byte, model string) {
	var stream []byte
	var opts []span
	sc := newScanner([][]string{chatModel: {"model"}, chatStream: {"stream"}, chatStreamOptions: {"stream_options"}},
		func(w int, raw []byte, start, end int64) {
			switch w {
			case chatModel:
				model = modelName(raw)
			case chatStream:
				stream = append(stream[:0], raw...)
			case chatStreamOptions:
				opts = append(opts, span{start: start, end: end, raw: bytes.Clone(raw)})
			}
		})
	sc.feed(body)
	if string(stream) != "true" {
		return body, model
	}
	if len(opts) == 0 {
		open := bytes.IndexByte(body, '{')
		if open < 0 || len(bytes.TrimSpace(body[:open])) > 0 {
			return body, model
		}
		const first = `"stream_options":{"include_usage":true},`
		out = make([]byte, 0, len(body)+len(first))
		out = append(append(append(out, body[:open+1]...), first...), body[open+1:]...)
		return out, model
	}
	out = make([]byte, 0, len(body)+32*len(opts))
	at := int64(0)
	for _, o := range opts {
		out = append(append(out, body[at:o.start]...), includeUsage(o.raw)...)
		at = o.end
	}
	return append(out, body[at:]...), model
}

// includeUsage is the stream_options value raw with include_usage true,
// its other options kept.
func includeUsage(raw []byte) []byte {
	var opts map[string]json.RawMessage
	if json.Unmarshal(raw, &opts) != nil || opts == nil {
		opts = map[string]json.RawMessage{}
	}
	opts["include_usage"] = json.RawMessage("true")
	b, _ := json.Marshal(opts)
	return b
}
