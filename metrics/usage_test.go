package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-sh/berth/gateway"
)

// Each model call counts once, its tokens by kind and its cost, under its
// agent, upstream and model.
func TestModelCallsFeedTheirFamilies(t *testing.T) {
	m := newTest()
	c := gateway.Call{Upstream: "anthropic", Model: "claude-x", Status: 200,
		InputTokens: 10, OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40, CostUSD: 0.25}
	m.ModelCalled("claude", c)
	m.ModelCalled("claude", c)
	m.ModelCalled("codex", gateway.Call{Upstream: "openai", Model: "gpt-x", InputTokens: 5, CostUSD: 0.5})
	want := `
# HELP berth_model_calls_total Model calls forwarded by the model gateway, by agent, upstream and model.
# TYPE berth_model_calls_total counter
berth_model_calls_total{agent="claude",model="claude-x",upstream="anthropic"} 2
berth_model_calls_total{agent="codex",model="gpt-x",upstream="openai"} 1
# HELP berth_model_cost_usd_total Cost in US dollars of the model calls at the upstreams' prices, by agent, upstream and model.
# TYPE berth_model_cost_usd_total counter
berth_model_cost_usd_total{agent="claude",model="claude-x",upstream="anthropic"} 0.5
berth_model_cost_usd_total{agent="codex",model="gpt-x",upstream="openai"} 0.5
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"berth_model_calls_total", "berth_model_cost_usd_total"); err != nil {
		t.Error(err)
	}
	for kind, n := range map[string]float64{"input": 20, "output": 40, "cache_read": 60, "cache_write": 80} {
		if got := testutil.ToFloat64(m.modelCalls.tokens.WithLabelValues("claude", "anthropic", "claude-x", kind)); got != n {
			t.Errorf("%s tokens = %v, want %v", kind, got, n)
		}
	}
}

// An agent that names a new model at every call adds at most maxModels
// series (and a name too long adds none): the rest are "other".
func TestModelLabelsAreBounded(t *testing.T) {
	m := newTest()
	for i := range 3 * maxModels {
		m.ModelCalled("claude", gateway.Call{Upstream: "anthropic", Model: fmt.Sprintf("model-%d", i)})
	}
	m.ModelCalled("claude", gateway.Call{Upstream: "anthropic", Model: strings.Repeat("x", maxModelLabel+1)})
	if n := testutil.CollectAndCount(m.modelCalls.calls); n != maxModels+1 {
		t.Fatalf("%d series of model calls, want %d", n, maxModels+1)
	}
	if got := testutil.ToFloat64(m.modelCalls.calls.WithLabelValues("claude", "anthropic", otherModel)); got != 2*maxModels+1 {
		t.Fatalf("other = %v, want %d", got, 2*maxModels+1)
	}
}
