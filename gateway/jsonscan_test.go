package gateway

import (
	"fmt"
	"strings"
	"testing"
)

// hit is one value a scanner found.
type hit struct {
	w          int
	raw        string
	start, end int64
}

// scan feeds text to a scanner watching watch, in pieces of size n (0:
// whole), and returns what it found.
func scan(watch [][]string, text string, n int) []hit {
	var out []hit
	s := newScanner(watch, func(w int, raw []byte, start, end int64) {
		r := "<too large>"
		if raw != nil {
			r = string(raw)
		}
		out = append(out, hit{w, r, start, end})
	})
	if n == 0 {
		n = len(text) + 1
	}
	for i := 0; i < len(text); i += n {
		s.feed([]byte(text[i:min(i+n, len(text))]))
	}
	return out
}

// The scanner finds the values at the watched paths only, whole, with
// their offsets, in text fed in pieces of any size: not a key of that name
// deeper (a model's tool input), nor in a string, escaped or not.
func TestScannerFindsWatchedPaths(t *testing.T) {
	text := `{"type":"message","content":[{"type":"tool_use","input":{"usage":{"input_tokens":999}}},` +
		`{"type":"text","text":"say \"usage\":{\"input_tokens\":5} and \\"}],"message":{"usage":{"output_tokens":1}},` +
		`"usage" : { "input_tokens" : 11, "nested": {"a":[1,{"b":"}"}]} } ,"model":"m\"x","stream":true}`
	watch := [][]string{{"usage"}, {"message", "usage"}, {"model"}, {"stream"}}
	want := []hit{
		{1, `{"output_tokens":1}`, 0, 0},
		{0, `{ "input_tokens" : 11, "nested": {"a":[1,{"b":"}"}]} }`, 0, 0},
		{2, `"m\"x"`, 0, 0},
		{3, `true`, 0, 0},
	}
	for i := range want {
		want[i].start = int64(strings.Index(text, want[i].raw))
		want[i].end = want[i].start + int64(len(want[i].raw))
	}
	for _, n := range []int{0, 1, 2, 3, 7, 64} {
		if got := scan(watch, text, n); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pieces of %d:\n got %v\nwant %v", n, got, want)
		}
	}
}

// An array adds no key: each element of a top-level array (Gemini's
// stream without alt=sse) is read as a text of its own.
func TestScannerArrayElements(t *testing.T) {
	text := `[{"usageMetadata":{"a":1}}` + "\r\n," + `{"candidates":[{"usageMetadata":{"x":1}}],"usageMetadata":{"a":2}}]`
	got := scan([][]string{{"usageMetadata"}}, text, 5)
	if len(got) != 2 || got[0].raw != `{"a":1}` || got[1].raw != `{"a":2}` {
		t.Fatalf("got %v", got)
	}
}

// A value larger than captureCap is reported without its bytes; deep
// nesting and text that is not JSON are followed without harm.
func TestScannerBounds(t *testing.T) {
	big := `{"usage":{"x":"` + strings.Repeat("a", captureCap) + `"},"model":"m"}`
	got := scan([][]string{{"usage"}, {"model"}}, big, 1000)
	if len(got) != 2 || got[0].raw != "<too large>" || got[1].raw != `"m"` {
		t.Fatalf("got %v", got)
	}
	// Deeper than scanDepth, nothing is watched, and the depth is kept:
	// back at the top, a usage is found again.
	deep := strings.Repeat(`{"a":[`, 50) + `{"usage":{"in":1}}` + strings.Repeat(`]}`, 50)
	if got := scan([][]string{{"usage"}}, deep+`{"usage":{"top":1}}`, 3); len(got) != 1 || got[0].raw != `{"top":1}` {
		t.Fatalf("deep: %v", got)
	}
	if got := scan([][]string{{"usage"}}, `}}]]"usage":{"a":1} data: [DONE]`, 2); len(got) != 0 {
		t.Fatalf("garbage: %v", got)
	}
}

// Whatever the text and however it is cut, the scanner finds the same
// values, and never fails.
func FuzzScanner(f *testing.F) {
	f.Add(`{"usage":{"a":"\\\""},"message":{"usage":{}},"model":"x"}`, 3)
	f.Add(`[{"usageMetadata":{"a":1}},{"usageMetadata":{"a":2}}]`, 1)
	f.Add(`{"a":"\u0022usage\u0022","usage":nul`, 2)
	watch := [][]string{{"usage"}, {"message", "usage"}, {"usageMetadata"}, {"model"}}
	f.Fuzz(func(t *testing.T, text string, n int) {
		n = max(n%97, 1)
		if whole, cut := scan(watch, text, 0), scan(watch, text, n); fmt.Sprint(whole) != fmt.Sprint(cut) {
			t.Fatalf("whole %v\ncut in %d: %v", whole, n, cut)
		}
	})
}

// An event stream's data reaches the scanner one event at a time,
// whatever its line endings, comments and pieces: each event is a JSON
// text of its own, and a broken one does not spoil the next.
func TestSSEReader(t *testing.T) {
	stream := ": ping\r\n\r\nevent: message_start\r\ndata: {\"message\":{\"usage\":{\"a\":1}}}\r\n\r\n" +
		"event: broken\ndata: {\"x\":{\"y\":\"unterminated\n\n" +
		"data:{\"usage\":\ndata: {\"b\":2}}\n\n" +
		"id: 7\rdata: {\"usage\":{\"c\":3}}\r\r" +
		"data: [DONE]\n\n"
	for _, n := range []int{1, 2, 5, len(stream)} {
		var got []string
		sc := newScanner([][]string{{"usage"}, {"message", "usage"}}, func(_ int, raw []byte, _, _ int64) {
			got = append(got, string(raw))
		})
		r := &sseReader{sc: sc}
		for i := 0; i < len(stream); i += n {
			r.feed([]byte(stream[i:min(i+n, len(stream))]))
		}
		if want := []string{`{"a":1}`, "{\"b\":2}", `{"c":3}`}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("pieces of %d: got %q, want %q", n, got, want)
		}
	}
}

// Each API's usage is read as the API reports it: Anthropic's field by
// field (message_start, then message_delta's cumulative counts);
// OpenAI's from the last chunk (the others' null ignored) less its cached
// tokens; the Responses API's from response.completed; Gemini's last
// usageMetadata, thoughts counted as output; never a tool's input that
// happens to hold a usage.
func TestMeters(t *testing.T) {
	for _, c := range []struct {
		name        string
		api         api
		contentType string
		text        string
		want        usage
	}{
		{"anthropic stream", apiMessages, "text/event-stream; charset=utf-8",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\"cache_creation_input_tokens\":4,\"cache_read_input_tokens\":6,\"output_tokens\":1}}}\n\n" +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"tool_use\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"partial_json\":\"{\\\"usage\\\":{\\\"output_tokens\\\":0}}\"}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n",
			usage{input: 10, output: 40, cacheRead: 6, cacheWrite: 4}},
		{"anthropic delta with input", apiMessages, "text/event-stream",
			"data: {\"message\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\ndata: {\"usage\":{\"input_tokens\":12,\"output_tokens\":3}}\n\n",
			usage{input: 12, output: 3}},
		{"anthropic json", apiMessages, "application/json",
			`{"content":[{"type":"tool_use","input":{"usage":{"input_tokens":0}}}],"usage":{"input_tokens":3,"output_tokens":4}}`,
			usage{input: 3, output: 4}},
		{"openai stream", apiChat, "text/event-stream",
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":20,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\ndata: [DONE]\n\n",
			usage{input: 36, output: 20, cacheRead: 64}},
		{"responses stream", apiResponses, "text/event-stream",
			"event: response.created\ndata: {\"response\":{\"usage\":null}}\n\nevent: response.completed\ndata: {\"response\":{\"output\":[{\"type\":\"function_call\",\"arguments\":\"{}\"}],\"usage\":{\"input_tokens\":50,\"input_tokens_details\":{\"cached_tokens\":10},\"output_tokens\":7}}}\n\n",
			usage{input: 40, output: 7, cacheRead: 10}},
		{"gemini array", apiGemini, "application/json; charset=UTF-8",
			`[{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"usageMetadata":{"promptTokenCount":0}}}}]}}],"usageMetadata":{"promptTokenCount":30,"candidatesTokenCount":2}}` +
				",\r\n" + `{"usageMetadata":{"promptTokenCount":30,"cachedContentTokenCount":20,"candidatesTokenCount":9,"thoughtsTokenCount":5}}]`,
			usage{input: 10, output: 14, cacheRead: 20}},
	} {
		for _, n := range []int{1, 7, len(c.text)} {
			m := newMeter(c.api, c.contentType)
			for i := 0; i < len(c.text); i += n {
				m.feed([]byte(c.text[i:min(i+n, len(c.text))]))
			}
			if m.u != c.want {
				t.Fatalf("%s, pieces of %d: %+v, want %+v", c.name, n, m.u, c.want)
			}
		}
	}
}

// BenchmarkScanner reads the model of an 80 KiB request of many small
// messages (the scanner's worst case: much structure, short strings).
func BenchmarkScanner(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"messages":[` +
		strings.Repeat(`{"role":"user","content":"a line of code\n\tand \"quotes\""},{"role":"assistant","content":"ok"},`, 1000) +
		`{"role":"user","content":"hello"}]}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		s := newScanner([][]string{{"model"}}, func(int, []byte, int64, int64) {})
		for i := 0; i < len(body); i += copyBuffer {
			s.feed(body[i:min(i+copyBuffer, len(body))])
		}
	}
}
