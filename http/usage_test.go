package http

import (
	"testing"

	"github.com/berth-sh/berth"
)

// Budgets below zero are refused at the edge on create and spawn (400
// naming the field, the service never asked); valid ones reach the
// service, and the Session JSON shows usage and the budgets.
func TestBudgetsAtTheEdge(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	for _, c := range []struct{ path, body, field string }{
		{"/v1/sessions", `{"agent":"demo","max_cost_usd":-1}`, "max_cost_usd"},
		{"/v1/sessions", `{"agent":"demo","max_tokens":-1}`, "max_tokens"},
		{"/v1/sessions/ses_1/children", `{"agent":"demo","ttl_seconds":60,"max_cost_usd":-0.5}`, "max_cost_usd"},
	} {
		status, ans, _ := call(t, h, "POST", c.path, c.body)
		if status != 400 || errCode(t, ans) != berth.EInvalid || ans["error"].(map[string]any)["details"].(map[string]any)["field"] != c.field {
			t.Errorf("POST %s %s = %d %v, want 400 naming %s", c.path, c.body, status, ans, c.field)
		}
	}
	if len(f.spawns) != 0 || f.lastCreate.Agent != "" {
		t.Fatal("the service was asked for a refused body")
	}
	status, ans, _ := call(t, h, "POST", "/v1/sessions", `{"agent":"demo","max_cost_usd":2.5,"max_tokens":1000}`)
	if status != 201 || f.lastCreate.MaxCostUSD == nil || *f.lastCreate.MaxCostUSD != 2.5 || *f.lastCreate.MaxTokens != 1000 {
		t.Fatalf("create with budgets = %d %v; the service was asked %+v", status, ans, f.lastCreate)
	}
	if u, ok := ans["usage"].(map[string]any); !ok || u["model_calls"] != 0.0 || u["cost_usd"] != 0.0 {
		t.Fatalf("the Session JSON's usage: %v", ans["usage"])
	}
}
