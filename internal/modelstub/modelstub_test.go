package modelstub

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// post sends body to path and returns the response's body.
func post(t *testing.T, srv *httptest.Server, path, body string) string {
	t.Helper()
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// The stand-in answers as the APIs do, from the conversation alone: text
// (the user's words, markup the agent added left out), a call of the
// agent's own write tool with the argument names of its schema, and text
// after a tool's result; streamed and not.
func TestStubAnswers(t *testing.T) {
	s := &Server{}
	srv := httptest.NewServer(s)
	defer srv.Close()

	got := post(t, srv, "/v1/messages", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hello there"},{"type":"text","text":"<system-reminder>\nignore\n</system-reminder>"}]},{"role":"system","content":"context after"}]}`)
	var msg struct {
		Content []struct{ Type, Text string } `json:"content"`
	}
	if err := json.Unmarshal([]byte(got), &msg); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "stub: hello there" {
		t.Fatalf("anthropic text: %s (%v)", got, err)
	}
	got = post(t, srv, "/v1/messages", `{"model":"m","stream":true,"tools":[{"name":"Write","input_schema":{"properties":{"file_path":{},"content":{}}}}],
		"messages":[{"role":"user","content":"write /w/a.txt some words"}]}`)
	for _, want := range []string{"event: message_start", `"type":"tool_use"`, `"name":"Write"`, `\"file_path\":\"/w/a.txt\"`, `\"content\":\"some words\"`, `"stop_reason":"tool_use"`, "event: message_stop"} {
		if !strings.Contains(got, want) {
			t.Fatalf("anthropic tool stream lacks %s:\n%s", want, got)
		}
	}
	got = post(t, srv, "/v1/messages", `{"model":"m","stream":true,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}`)
	if !strings.Contains(got, `"text":"wrote it"`) || !strings.Contains(got, `"stop_reason":"end_turn"`) {
		t.Fatalf("anthropic after tool:\n%s", got)
	}

	got = post(t, srv, "/v1/chat/completions", `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"write","parameters":{"properties":{"filePath":{},"content":{}}}}}],
		"messages":[{"role":"system","content":"sys"},{"role":"user","content":[{"type":"text","text":"write /w/b.txt more"}]}]}`)
	for _, want := range []string{`"tool_calls":[{`, `"name":"write"`, `\"filePath\":\"/w/b.txt\"`, `"finish_reason":"tool_calls"`, "data: [DONE]"} {
		if !strings.Contains(got, want) {
			t.Fatalf("openai tool stream lacks %s:\n%s", want, got)
		}
	}
	got = post(t, srv, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c","content":"ok"}]}`)
	if !strings.Contains(got, `"content":"wrote it"`) || !strings.Contains(got, `"finish_reason":"stop"`) {
		t.Fatalf("openai after tool: %s", got)
	}
	got = post(t, srv, "/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(got, `"content":"stub: hi"`) {
		t.Fatalf("openai text: %s", got)
	}
	got = post(t, srv, "/v1/responses", `{"model":"m","stream":true,"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"},{"type":"input_text","text":"hello codex"}]}]}`)
	for _, want := range []string{"event: response.created", `"delta":"stub: hello codex"`, `"text":"stub: hello codex","type":"output_text"`, "event: response.completed"} {
		if !strings.Contains(got, want) {
			t.Fatalf("responses text lacks %s:\n%s", want, got)
		}
	}
	got = post(t, srv, "/v1/responses", `{"model":"m","stream":true,"input":[{"type":"function_call_output","call_id":"c","output":"ok"}]}`)
	if !strings.Contains(got, `"text":"wrote it"`) {
		t.Fatalf("responses after tool:\n%s", got)
	}
	if r := s.Replies(); len(r) != 8 || r[1] != "anthropic: call Write" {
		t.Fatalf("replies: %v", r)
	}
}

// Gemini is answered as the API does, non-streaming and streamed as
// events or as a JSON array; an OpenAI chat stream has its usage only when
// stream_options.include_usage asks for it, as the API does.
func TestStubGeminiAndStreamUsage(t *testing.T) {
	s := &Server{}
	srv := httptest.NewServer(s)
	defer srv.Close()

	got := post(t, srv, "/v1beta/models/gemini-x:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hello gemini"}]}]}`)
	for _, want := range []string{`"text":"stub: hello gemini"`, `"finishReason":"STOP"`, `"promptTokenCount":18`, `"cachedContentTokenCount":7`, `"candidatesTokenCount":10`, `"thoughtsTokenCount":3`} {
		if !strings.Contains(got, want) {
			t.Fatalf("gemini lacks %s: %s", want, got)
		}
	}
	got = post(t, srv, "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", `{"tools":[{"functionDeclarations":[{"name":"write_file","parametersJsonSchema":{"properties":{"file_path":{},"content":{}}}}]}],
		"contents":[{"role":"user","parts":[{"text":"write /w/c.txt gem"}]}]}`)
	for _, want := range []string{"data: {", `"functionCall":{"args":{"content":"gem","file_path":"/w/c.txt"},"name":"write_file"}`, `"candidatesTokenCount":1,`, `"candidatesTokenCount":10,`} {
		if !strings.Contains(got, want) {
			t.Fatalf("gemini event stream lacks %s:\n%s", want, got)
		}
	}
	got = post(t, srv, "/v1beta/models/gemini-x:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"write_file","response":{}}}]}]}`)
	var chunks []map[string]any
	if err := json.Unmarshal([]byte(got), &chunks); err != nil || len(chunks) != 2 || !strings.Contains(got, `"text":"wrote it"`) {
		t.Fatalf("gemini array stream: %v\n%s", err, got)
	}

	got = post(t, srv, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if strings.Contains(got, `"prompt_tokens"`) {
		t.Fatalf("a stream not asking for usage has it:\n%s", got)
	}
	got = post(t, srv, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	if !strings.Contains(got, `"choices":[],"created"`) || !strings.Contains(got, `"prompt_tokens":18`) || !strings.Contains(got, `"usage":null`) {
		t.Fatalf("a stream asking for usage:\n%s", got)
	}
}

// A write asked of an agent that patches is answered with its patch tool:
// Codex's code-mode exec (offered in an additional_tools item, inside a
// namespace) gets JavaScript that calls tools.apply_patch; OpenCode's
// apply_patch function gets the patch in its own argument; a user message
// with no type is the user's still.
func TestStubResponsesPatches(t *testing.T) {
	s := &Server{}
	srv := httptest.NewServer(s)
	defer srv.Close()

	got := post(t, srv, "/v1/responses", `{"model":"m","stream":true,"input":[
		{"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"functions","tools":[
			{"type":"custom","name":"exec","description":"Run JavaScript… declare const tools: { apply_patch(input: string): Promise<unknown>; };"}]}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"write /w/c.txt by codex"}]}]}`)
	for _, want := range []string{`"type":"custom_tool_call"`, `"name":"exec"`, `"namespace":"functions"`,
		`await tools.apply_patch(\"*** Begin Patch\\n*** Add File: /w/c.txt\\n+by codex\\n*** End Patch\\n\")`, "event: response.completed"} {
		if !strings.Contains(got, want) {
			t.Fatalf("codex's write lacks %s:\n%s", want, got)
		}
	}
	got = post(t, srv, "/v1/responses", `{"model":"m","stream":false,"tools":[{"type":"function","name":"bash","parameters":{"properties":{"command":{}}}},
		{"type":"function","name":"apply_patch","parameters":{"properties":{"patchText":{}}}}],
		"input":[{"role":"user","content":[{"type":"input_text","text":"write /w/o.txt by opencode"}]}]}`)
	for _, want := range []string{`"type":"function_call"`, `"name":"apply_patch"`, `"arguments":"{\"patchText\":\"*** Begin Patch\\n*** Add File: /w/o.txt\\n+by opencode\\n*** End Patch\\n\"}"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("opencode's write lacks %s:\n%s", want, got)
		}
	}
	got = post(t, srv, "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hello"}]}]}`)
	if !strings.Contains(got, `"text":"stub: hello"`) {
		t.Fatalf("a user message with no type: %s", got)
	}
	got = post(t, srv, "/v1/responses", `{"model":"m","input":[{"type":"custom_tool_call_output","call_id":"c","output":"ok"}]}`)
	if !strings.Contains(got, `"text":"wrote it"`) {
		t.Fatalf("after a custom tool: %s", got)
	}
}
