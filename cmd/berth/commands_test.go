package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeAPI answers the daemon's API with canned JSON and records requests.
type fakeAPI struct {
	mu       sync.Mutex
	requests []string
	bodies   []string
}

// serve answers one request.
func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, r.Method+" "+r.URL.RequestURI())
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	answer := func(status int, v string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, v+"\n")
	}
	q := r.URL.Query()
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/agents":
		answer(200, `{"agents":[{"name":"demo","command":"berth","args":["agent-demo"],"available":true,"description":"the demo"},`+
			`{"name":"claude","command":"npx","args":["-y","@acp/claude"],"available":true,"package":"@acp/claude","fetch":true,"description":"Claude"},`+
			`{"name":"gemini","command":"gemini","args":["--acp"],"available":false,"description":"Gemini"},`+
			`{"name":"qwen","command":"/home/u/.local/share/npm-agents/node_modules/.bin/qwen","args":["--acp","--experimental-skills"],"available":true,"description":"Qwen"}]}`)
	case "GET /v1/sessions":
		if q.Get("cursor") == "" {
			answer(200, `{"sessions":[{"id":"ses_a","name":"alpha","agent":"demo","state":"active","badge":"idle","labels":{"t":"w"}}],"next_cursor":"c2"}`)
			return
		}
		answer(200, `{"sessions":[{"id":"ses_b","agent":"demo","state":"stopped","badge":"stopped","stop_reason":"idle_timeout","labels":{}}],"next_cursor":""}`)
	case "GET /v1/sessions/ses_a":
		answer(200, `{"id":"ses_a",  "name":"alpha","agent":"demo","state":"active","badge":"idle","extra_field":1}`)
	case "GET /v1/sessions/missing":
		answer(404, `{"error":{"code":"not_found","message":"session missing not found","details":{}}}`)
	case "POST /v1/sessions/ses_a/cancel":
		answer(409, `{"error":{"code":"conflict","message":"no turn in flight","details":{}}}`)
	case "POST /v1/sessions/ses_a/prompts":
		if q.Get("wait") == "true" {
			answer(200, `{"turn_id":"turn_1","stop_reason":"end_turn","text":"hello there"}`)
			return
		}
		answer(202, `{"status":"queued","entry_id":"ent_1","position":2,"generation":1}`)
	case "POST /v1/sessions/ses_a/stop":
		answer(200, `{"id":"ses_a","state":"stopped","stop_reason":"user_requested"}`)
	case "DELETE /v1/sessions/ses_a":
		w.WriteHeader(204)
	case "GET /v1/sessions/ses_a/events":
		after := q.Get("after")
		switch after {
		case "", "0":
			answer(200, `{"events":[`+event(1, "session_created")+`,`+event(2, "agent_message")+`],"next_after":2}`)
		default:
			answer(200, `{"events":[],"next_after":`+after+`}`)
		}
	case "GET /v1/sessions/ses_a/events/stream":
		w.Header().Set("Content-Type", "text/event-stream")
		for seq := int64(3); seq <= 4; seq++ {
			fmt.Fprintf(w, "id: %d\nevent: agent_message\ndata: %s\n\n: ping\n\n", seq, event(seq, "agent_message"))
		}
		fmt.Fprint(w, ": end\n\n")
	case "POST /v1/sessions/ses_a/permissions/perm_1":
		answer(200, `{"id":"perm_1","state":"decided","option_id":"allow","decided_by":"user"}`)
	case "POST /v1/sessions/ses_a/resume":
		answer(200, `{"id":"ses_a","state":"active"}`)
	case "GET /v1/sessions/ses_a/queue":
		answer(200, `{"entries":[{"id":"entry_1","kind":"queue","text":"echo later","position":1}],"generation":2}`)
	case "DELETE /v1/sessions/ses_a/queue/entry_1":
		answer(200, `{"status":"canceled"}`)
	case "GET /v1/sessions/ses_a/permissions":
		answer(200, `{"permissions":[{"id":"perm_1","state":"pending","tool_call":{"title":"rm -rf build"},"options":[{"id":"ok-once","name":"Allow once","kind":"allow_once"},{"id":"never","name":"Reject","kind":"reject_once"}]}]}`)
	default:
		answer(404, `{"error":{"code":"not_found","message":"no route","details":{}}}`)
	}
}

// event returns an event's JSON.
func event(seq int64, typ string) string {
	return fmt.Sprintf(`{"seq":%d,"session_id":"ses_a","type":%q,"time":"2026-01-02T03:04:05Z","data":{"text":"hi %d"}}`, seq, typ, seq)
}

// startAPI serves a fakeAPI for the test.
func startAPI(t *testing.T) (*fakeAPI, string) {
	t.Helper()
	isolateEnv(t)
	f := &fakeAPI{}
	ts := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(ts.Close)
	return f, ts.URL
}

func TestCommandsTable(t *testing.T) {
	_, addr := startAPI(t)
	tests := []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"agents"}, []string{"NAME", "demo", "yes", "berth agent-demo", "the demo", "yes (npx downloads @acp/claude at first start)", "no (gemini not found)",
			// The whole command: long npm paths differ only at their end.
			"/home/u/.local/share/npm-agents/node_modules/.bin/qwen --acp --experimental-skills"}, nil},
		{[]string{"ls"}, []string{"ses_a", "alpha", "idle", "t=w"}, []string{"ses_b"}},
		{[]string{"ls", "--all"}, []string{"ses_a", "ses_b", "stopped (idle_timeout)"}, nil},
		{[]string{"show", "ses_a"}, []string{"id:", "ses_a", "agent:", "demo", "status:", "idle"}, []string{"generation"}},
		{[]string{"prompt", "ses_a", "hi"}, []string{"queued as ent_1 (position 2)"}, []string{"generation"}},
		{[]string{"prompt", "ses_a", "hi", "--wait"}, []string{"hello there\n[end_turn] turn turn_1"}, nil},
		{[]string{"stop", "ses_a"}, []string{"stopped ses_a (user_requested)"}, nil},
		{[]string{"approve", "ses_a", "perm_1"}, []string{"perm_1: decided (option allow)"}, nil},
		{[]string{"resume", "ses_a"}, []string{"resumed ses_a (active)"}, nil},
		{[]string{"queue", "ses_a"}, []string{"ENTRY", "entry_1", "queue", "echo later"}, nil},
		{[]string{"queue", "ses_a", "--drop", "entry_1"}, []string{"dropped entry_1"}, nil},
		{[]string{"permissions", "ses_a", "--pending"}, []string{"PERMISSION", "perm_1", "pending", "rm -rf build", "ok-once (Allow once) | never (Reject)"}, nil},
		{[]string{"rm", "ses_a"}, []string{"deleted ses_a"}, nil},
		{[]string{"logs", "ses_a"}, []string{"     1  ", "session_created", "     2  ", "agent_message", "hi 2"}, nil},
		{[]string{"logs", "ses_a", "-f", "--after", "2"}, []string{"     3  ", "     4  ", "hi 4"}, []string{"     2  "}},
	}
	for _, tt := range tests {
		out, err := runCLI(t, append(tt.args, "--addr", addr)...)
		if err != nil {
			t.Errorf("berth %v: %v", tt.args, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("berth %v: output lacks %q:\n%s", tt.args, w, out)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(out, w) {
				t.Errorf("berth %v: output has %q:\n%s", tt.args, w, out)
			}
		}
	}
}

func TestApproveSendsTheDecision(t *testing.T) {
	for _, c := range []struct {
		flags []string
		body  string
	}{
		{nil, `{"decision":"allow_once"}`},
		{[]string{"--reject"}, `{"decision":"reject_once"}`},
		{[]string{"--option", "allow_always"}, `{"option_id":"allow_always"}`},
	} {
		f, addr := startAPI(t)
		if _, err := runCLI(t, append([]string{"approve", "ses_a", "perm_1", "--addr", addr}, c.flags...)...); err != nil {
			t.Fatalf("approve %v: %v", c.flags, err)
		}
		if got := strings.TrimSpace(f.bodies[0]); got != c.body {
			t.Errorf("approve %v sent %s, want %s", c.flags, got, c.body)
		}
	}
	if _, err := runCLI(t, "approve", "ses_a", "perm_1", "--reject", "--option", "x", "--addr", "127.0.0.1:1"); exitCode(err) != 2 {
		t.Errorf("--reject with --option: exit %d, want 2", exitCode(err))
	}
}

func TestCommandsJSON(t *testing.T) {
	f, addr := startAPI(t)
	// The API's JSON, unchanged but for whitespace, extra fields included.
	out, err := runCLI(t, "show", "ses_a", "-o", "json", "--addr", addr)
	if err != nil || out != `{"id":"ses_a","name":"alpha","agent":"demo","state":"active","badge":"idle","extra_field":1}`+"\n" {
		t.Errorf("show -o json = %q, %v", out, err)
	}
	// Streams: one object per line.
	for _, args := range [][]string{{"logs", "ses_a"}, {"logs", "ses_a", "-f", "--after", "2"}} {
		out, err = runCLI(t, append(args, "-o", "json", "--addr", addr)...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if err != nil || len(lines) != 2 {
			t.Fatalf("%v -o json = %q, %v", args, out, err)
		}
		for _, l := range lines {
			var ev map[string]any
			if json.Unmarshal([]byte(l), &ev) != nil || ev["session_id"] != "ses_a" {
				t.Errorf("%v: line %q is not an event", args, l)
			}
		}
	}
	out, err = runCLI(t, "ls", "--all", "-o", "json", "--addr", addr)
	var page struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Sessions) != 2 {
		t.Errorf("ls -o json = %q, %v", out, err)
	}
	// A prompt sends mode and text as given.
	if _, err := runCLI(t, "prompt", "ses_a", "<b>", "--interrupt", "--addr", addr); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	last := f.bodies[len(f.bodies)-1]
	f.mu.Unlock()
	if strings.TrimSpace(last) != `{"text":"<b>","mode":"interrupt"}` {
		t.Errorf("prompt body = %q", last)
	}
}

func TestCommandErrorsExitCodes(t *testing.T) {
	_, addr := startAPI(t)
	_, err := runCLI(t, "show", "missing", "--addr", addr)
	if exitCode(err) != 3 || errorText(err) != "session missing not found" {
		t.Errorf("show missing: %v (exit %d)", err, exitCode(err))
	}
	_, err = runCLI(t, "cancel", "ses_a", "--addr", addr)
	if exitCode(err) != 4 {
		t.Errorf("cancel idle: %v (exit %d)", err, exitCode(err))
	}
	_, err = runCLI(t, "agents", "--addr", "127.0.0.1:1")
	if exitCode(err) != 1 || !strings.Contains(errorText(err), "no berth daemon answers at http://127.0.0.1:1") {
		t.Errorf("no daemon: %v (exit %d)", err, exitCode(err))
	}
}
