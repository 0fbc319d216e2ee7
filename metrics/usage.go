package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-sh/berth/gateway"
	"github.com/berth-sh/berth/session"
)

// maxModels bounds the distinct model labels: the model is what the
// agent's request named, and a hostile agent could name a new one at each
// call. The models past it are counted as otherModel.
const maxModels = 64

// maxModelLabel bounds the length of one model label.
const maxModelLabel = 128

// otherModel is the model label of the calls past maxModels.
const otherModel = "other"

// modelCalls are the families of the gateway's model calls
// (docs/api.md, Metrics).
type modelCalls struct {
	calls  *prometheus.CounterVec
	tokens *prometheus.CounterVec
	cost   *prometheus.CounterVec

	mu     sync.Mutex
	models map[string]bool // the model labels given so far
}

var _ session.UsageObserver = (*Metrics)(nil)

// newModelCalls makes the families; the caller registers them.
func newModelCalls() *modelCalls {
	labels := []string{"agent", "upstream", "model"}
	return &modelCalls{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "model_calls_total",
			Help: "Model calls forwarded by the model gateway, by agent, upstream and model.",
		}, labels),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "model_tokens_total",
			Help: "Tokens of the model calls as the upstream counted them, by kind (input, output, cache_read, cache_write), agent, upstream and model.",
		}, append(labels, "kind")),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "model_cost_usd_total",
			Help: "Cost in US dollars of the model calls at the upstreams' prices, by agent, upstream and model.",
		}, labels),
		models: map[string]bool{},
	}
}

// model is the label of the model m: itself while few are known.
func (mc *modelCalls) model(m string) string {
	if len(m) > maxModelLabel {
		return otherModel
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if !mc.models[m] {
		if len(mc.models) >= maxModels {
			return otherModel
		}
		mc.models[m] = true
	}
	return m
}

// ModelCalled implements session.UsageObserver.
func (m *Metrics) ModelCalled(agent string, c gateway.Call) {
	mc := m.modelCalls
	model := mc.model(c.Model)
	mc.calls.WithLabelValues(agent, c.Upstream, model).Inc()
	for _, t := range []struct {
		kind string
		n    int64
	}{{"input", c.InputTokens}, {"output", c.OutputTokens}, {"cache_read", c.CacheReadTokens}, {"cache_write", c.CacheWriteTokens}} {
		mc.tokens.WithLabelValues(agent, c.Upstream, model, t.kind).Add(float64(max(t.n, 0)))
	}
	mc.cost.WithLabelValues(agent, c.Upstream, model).Add(max(c.CostUSD, 0))
}
