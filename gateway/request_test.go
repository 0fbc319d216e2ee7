package gateway

import "testing"

// A Chat Completions body that asks for a stream gets
// stream_options.include_usage true, its other options kept, every copy
// of the key changed (the API reads the last); any other body is left as
// it is. The model is the last one named.
func TestChatRequest(t *testing.T) {
	for _, c := range []struct{ in, out, model string }{
		{`{"model":"a","stream":false}`, `{"model":"a","stream":false}`, "a"},
		{`{"model":"a","messages":[]}`, `{"model":"a","messages":[]}`, "a"},
		{` {"stream":true,"model":"a"}`, ` {"stream_options":{"include_usage":true},"stream":true,"model":"a"}`, "a"},
		{`{"stream":true,"stream_options":null}`, `{"stream":true,"stream_options":{"include_usage":true}}`, ""},
		{`{"stream_options":{"include_usage":false,"x":1},"stream":true,"model":"a","model":"b"}`,
			`{"stream_options":{"include_usage":true,"x":1},"stream":true,"model":"a","model":"b"}`, "b"},
		{`{"stream_options":{},"stream":true,"stream_options":{"include_usage":false}}`,
			`{"stream_options":{"include_usage":true},"stream":true,"stream_options":{"include_usage":true}}`, ""},
		{`{"stream":true,"stream":false}`, `{"stream":true,"stream":false}`, ""},
		{`{"messages":[{"stream":true}]}`, `{"messages":[{"stream":true}]}`, ""},
		{`[{"stream":true}]`, `[{"stream":true}]`, ""},
	} {
		out, model := chatRequest([]byte(c.in))
		if string(out) != c.out || model != c.model {
			t.Errorf("%s:\n got %s %q\nwant %s %q", c.in, out, model, c.out, c.model)
		}
	}
}
