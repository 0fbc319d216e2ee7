package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
)

// usageSessions are a parent that spent $1.50 itself and $0.75 with its
// child, the child, and another agent's stopped session.
const usageSessions = `{"sessions":[
{"id":"ses_p","agent":"claude","state":"active","badge":"over_budget","labels":{},"max_cost_usd":2,"max_tokens":5000,
 "usage":{"model_calls":3,"input_tokens":100,"output_tokens":200,"cache_read_tokens":30,"cache_write_tokens":40,"cost_usd":1.5,
  "tree":{"model_calls":5,"input_tokens":150,"output_tokens":260,"cache_read_tokens":30,"cache_write_tokens":40,"cost_usd":2.25}}},
{"id":"ses_c","parent_id":"ses_p","agent":"claude","state":"active","badge":"idle","labels":{},
 "usage":{"model_calls":2,"input_tokens":50,"output_tokens":60,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.75}},
{"id":"ses_o","agent":"codex","state":"stopped","badge":"stopped","stop_reason":"user_requested","labels":{},
 "usage":{"model_calls":1,"input_tokens":7,"output_tokens":8,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.005}}
],"next_cursor":""}`

// usageAPI serves usageSessions and records the PATCHes it is sent.
type usageAPI struct {
	mu      sync.Mutex
	patches []string
}

func (f *usageAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /v1/sessions":
		io.WriteString(w, usageSessions)
	case "GET /v1/sessions/ses_p", "PATCH /v1/sessions/ses_p":
		if r.Method == http.MethodPatch {
			b, _ := io.ReadAll(r.Body)
			f.mu.Lock()
			f.patches = append(f.patches, string(b))
			f.mu.Unlock()
		}
		var page struct{ Sessions []json.RawMessage }
		_ = json.Unmarshal([]byte(usageSessions), &page)
		w.Write(page.Sessions[0])
	case "GET /v1/sessions/ses_p/events", "GET /v1/sessions/ses_c/events", "GET /v1/sessions/ses_o/events":
		id := strings.Split(r.URL.Path, "/")[3]
		if r.URL.Query().Get("type") != "model_call" || r.URL.Query().Get("after") != "" && r.URL.Query().Get("after") != "0" {
			io.WriteString(w, `{"events":[]}`)
			return
		}
		calls := map[string]string{
			"ses_p": modelCallEvent("ses_p", 1, "anthropic", "claude-x", 100, 1.5),
			"ses_c": modelCallEvent("ses_c", 1, "anthropic", "claude-x", 50, 0.5) + "," + modelCallEvent("ses_c", 2, "openai", "gpt-x", 10, 0.25),
			"ses_o": "",
		}
		io.WriteString(w, `{"events":[`+calls[id]+`]}`)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no route","details":{}}}`)
	}
}

// berth usage: the table of every session's own usage (stopped ones too)
// and a total that counts each call once; --by agent; one session's own,
// subtree and budgets; -o json the API's session; set and create send the
// budgets.
func TestUsageCLI(t *testing.T) {
	isolateEnv(t)
	f := &usageAPI{}
	ts := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(ts.Close)

	out, err := runCLI(t, "usage", "--addr", ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("berth usage:\n%s", out)
	}
	for i, want := range [][]string{
		{"SESSION", "STATUS", "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "COST"},
		{"ses_p", "over_budget", "3", "100", "200", "30", "40", "$1.50"},
		{"ses_c", "idle", "2", "50", "60", "$0.75"},
		{"ses_o", "stopped (user_requested)", "1", "7", "8", "$0.0050"},
		// The parent's tree is not counted again.
		{"TOTAL", "6", "157", "268", "30", "40", "$2.25"},
	} {
		if !containsAll(lines[i], want) {
			t.Errorf("line %d %q lacks %q", i, lines[i], want)
		}
	}

	out, err = runCLI(t, "usage", "--by", "agent", "--addr", ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 4 || !containsAll(lines[1], []string{"claude", "5", "150", "260", "$2.25"}) ||
		!containsAll(lines[2], []string{"codex", "1"}) || !strings.HasPrefix(lines[3], "TOTAL") {
		t.Fatalf("berth usage --by agent:\n%s", out)
	}

	out, err = runCLI(t, "usage", "ses_p", "--addr", ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"own:", "3 calls, 370 tokens (input 100, output 200, cache read 30, cache write 40), $1.50",
		"with its subtree:", "5 calls, 480 tokens", "$2.25", "budget:", "$2.00, 5000 tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("berth usage ses_p lacks %q:\n%s", want, out)
		}
	}
	out, err = runCLI(t, "usage", "ses_p", "--json", "--addr", ts.URL)
	var s struct {
		ID    string
		Usage struct {
			Tree struct {
				CostUSD float64 `json:"cost_usd"`
			}
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &s) != nil || s.ID != "ses_p" || s.Usage.Tree.CostUSD != 2.25 {
		t.Fatalf("berth usage ses_p --json: %v %q", err, out)
	}

	if _, err := runCLI(t, "set", "ses_p", "--max-cost-usd", "3.5", "--addr", ts.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "set", "ses_p", "--max-tokens", "0", "--addr", ts.URL); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	got := f.patches
	f.mu.Unlock()
	if len(got) != 2 || strings.TrimSpace(got[0]) != `{"max_cost_usd":3.5}` || strings.TrimSpace(got[1]) != `{"max_tokens":0}` {
		t.Fatalf("berth set sent %q", got)
	}
	if _, err := runCLI(t, "usage", "--by", "model", "--addr", ts.URL); exitCode(err) != 2 {
		t.Fatalf("--by model: %v (exit %d)", err, exitCode(err))
	}
}

// modelCallEvent is a model_call event's JSON.
func modelCallEvent(id string, seq int, upstream, model string, input int, cost float64) string {
	b, _ := json.Marshal(map[string]any{"seq": seq, "session_id": id, "type": "model_call", "time": "2026-01-02T03:04:05Z",
		"data": map[string]any{"upstream": upstream, "model": model, "status": 200, "input_tokens": input, "output_tokens": 1, "cost_usd": cost}})
	return string(b)
}

// berth usage --by upstream adds up the model_call events of one session
// or of every one by upstream and model; -o json prints the events.
func TestUsageByUpstreamCLI(t *testing.T) {
	isolateEnv(t)
	ts := httptest.NewServer(http.HandlerFunc((&usageAPI{}).serve))
	t.Cleanup(ts.Close)
	out, err := runCLI(t, "usage", "--by", "upstream", "--addr", ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !containsAll(lines[0], []string{"UPSTREAM", "MODEL", "CALLS"}) ||
		!containsAll(lines[1], []string{"anthropic", "claude-x", "2", "150", "$2.00"}) ||
		!containsAll(lines[2], []string{"openai", "gpt-x", "1", "10", "$0.25"}) ||
		!containsAll(lines[3], []string{"TOTAL", "3", "160", "$2.25"}) {
		t.Fatalf("berth usage --by upstream:\n%s", out)
	}
	out, err = runCLI(t, "usage", "ses_c", "--by", "upstream", "-o", "json", "--addr", ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `"upstream":"openai"`) {
		t.Fatalf("berth usage ses_c --by upstream -o json:\n%s", out)
	}
}

// containsAll reports whether line holds every one of want.
func containsAll(line string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(line, w) {
			return false
		}
	}
	return true
}

// berth logs shows a model call's upstream, model, status, tokens and
// cost, and a budget reached; berth attach says the budget is reached.
func TestUsageEventsRender(t *testing.T) {
	call := ev(1, berth.EventModelCall, map[string]any{"upstream": "anthropic", "model": "claude-x", "status": 200,
		"input_tokens": 12, "output_tokens": 34, "cost_usd": 0.5, "duration_ms": 1500})
	if got := summarize(call); !containsAll(got, []string{"anthropic", "claude-x", "status=200", "in=12", "out=34", "cost=0.5", "ms=1500"}) {
		t.Errorf("berth logs, model_call: %q", got)
	}
	spent := ev(2, berth.EventBudgetExceeded, map[string]any{"limit": "max_cost_usd", "max": 5, "spent": 5.25})
	if got := summarize(spent); !containsAll(got, []string{"max_cost_usd", "max=5", "spent=5.25"}) {
		t.Errorf("berth logs, budget_exceeded: %q", got)
	}
	var out strings.Builder
	newEventRenderer(&out).render(spent)
	if !strings.Contains(out.String(), "! budget reached: max_cost_usd 5 (spent 5.25)") {
		t.Errorf("berth attach, budget_exceeded: %q", out.String())
	}
}
