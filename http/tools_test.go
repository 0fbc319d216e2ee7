package http

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// fakeTools answers every tool and records the calls.
type fakeTools struct{ calls []string }

func (f *fakeTools) SpawnChild(_ context.Context, a berth.SpawnChildArgs) (*berth.SpawnChildResult, error) {
	f.calls = append(f.calls, "spawn "+a.Agent)
	return &berth.SpawnChildResult{ChildID: "ses_k", State: berth.StateActive}, nil
}
func (f *fakeTools) PromptChild(_ context.Context, a berth.PromptChildArgs) (*berth.PromptChildResult, error) {
	f.calls = append(f.calls, "prompt "+a.ChildID)
	return &berth.PromptChildResult{Text: "hi"}, nil
}
func (f *fakeTools) WaitChild(_ context.Context, a berth.WaitChildArgs) (*berth.WaitChildResult, error) {
	f.calls = append(f.calls, "wait "+a.ChildID)
	return nil, &berth.Error{Code: berth.ENotFound, Message: "no such child"}
}
func (f *fakeTools) ListChildren(context.Context) (*berth.ChildrenResult, error) {
	f.calls = append(f.calls, "list")
	return &berth.ChildrenResult{Children: []berth.ChildInfo{}}, nil
}
func (f *fakeTools) StopChild(_ context.Context, a berth.ChildArgs) (*berth.ChildInfo, error) {
	f.calls = append(f.calls, "stop "+a.ChildID)
	return &berth.ChildInfo{ChildID: a.ChildID}, nil
}

// The tools socket answers only POST /v1/tools/{tool} with the right
// credential, decodes the arguments as strictly as the API, and answers
// the API's error JSON; a refused call reaches no tool.
func TestToolsHandler(t *testing.T) {
	f := &fakeTools{}
	done := 0
	open := func(token string) (berth.ChildTools, func(), error) {
		if token != "good" {
			return nil, nil, berth.Errorf(berth.EUnauthenticated, "bad credential")
		}
		return f, func() { done++ }, nil
	}
	srv := httptest.NewServer(NewToolsHandler(open, 1024, "test", nil))
	defer srv.Close()
	call := func(method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	cases := []struct {
		method, path, token, body string
		status                    int
		want                      string
	}{
		{"POST", "/v1/tools/list_children", "good", `{}`, 200, `{"children":[]}`},
		{"POST", "/v1/tools/spawn_child", "good", `{"agent":"demo","ttl_seconds":5}`, 200, `"child_id":"ses_k"`},
		{"POST", "/v1/tools/wait_child", "good", `{"child_id":"ses_x"}`, 404, `"code":"not_found"`},
		{"POST", "/v1/tools/list_children", "", `{}`, 401, `"code":"unauthenticated"`},
		{"POST", "/v1/tools/list_children", "bad", `{}`, 401, `"code":"unauthenticated"`},
		{"GET", "/v1/tools/list_children", "good", ``, 404, `"code":"not_found"`},
		{"POST", "/v1/sessions", "good", `{}`, 404, `"code":"not_found"`},
		{"POST", "/v1/tools/rm_rf", "good", `{}`, 404, `no berth tool`},
		{"POST", "/v1/tools/stop_child", "good", `{"child_id":"ses_x","force":true}`, 400, `"code":"invalid_argument"`},
		{"POST", "/v1/tools/spawn_child", "good", `{"ttl_seconds":5,"network":{"allow":["a b"]}}`, 400, `"field":"network.allow[0]"`},
		{"POST", "/v1/tools/prompt_child", "good", `{"child_id":"ses_x","text":"` + strings.Repeat("a", 100000) + `"}`, 413, `"code":"payload_too_large"`},
		// The MCP stream is an upgrade of GET /v1/mcp, nothing else.
		{"GET", "/v1/mcp", "good", ``, 400, `"code":"invalid_argument"`},
		{"POST", "/v1/mcp", "good", `{}`, 400, `"code":"invalid_argument"`},
	}
	for _, c := range cases {
		st, body := call(c.method, c.path, c.token, c.body)
		if st != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s %s (%q) = %d %s, want %d with %s", c.method, c.path, c.token, st, body, c.status, c.want)
		}
	}
	// An upgrade with a credential not the session's is refused as any call.
	req, _ := http.NewRequest("GET", srv.URL+"/v1/mcp", nil)
	req.Header.Set("Authorization", "Bearer bad")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "berth-mcp")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("an upgrade with a bad credential = %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if got := strings.Join(f.calls, ","); got != "list,spawn demo,wait ses_x" {
		t.Fatalf("the tools got %q", got)
	}
	if done != 7 {
		t.Fatalf("done called %d times for 7 authorised calls", done)
	}
}
