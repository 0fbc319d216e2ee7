// Package metrics is berth's Prometheus instrumentation: one registry of
// the daemon's own (never the global default) with every family of
// docs/api.md, "Metrics", the hooks the rest of the daemon calls (the session
// manager's and the event log's observers, a service wrapper that counts
// SSE subscribers) and the collector that counts sessions at scrape time.
// Nothing else in berth imports Prometheus.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/hooks"
	"github.com/berth-sh/berth/session"
)

// namespace prefixes every family berth exports.
const namespace = "berth"

// scrapeTimeout bounds the store reads of one scrape.
const scrapeTimeout = 10 * time.Second

// Options say where the scrape-time families read from.
type Options struct {
	// Census counts the sessions (session.Manager.Census); nil exports
	// no session or queue gauges.
	Census func(ctx context.Context) (session.Census, error)
	// Hooks gives the hook deliveries' running totals
	// (hooks.Service.Counters); nil exports none.
	Hooks func() hooks.Counters
}

// Metrics is the daemon's registry and the instruments the daemon's parts
// feed. It implements session.Observer, session.UsageObserver and
// eventlog.Observer. Its methods
// are safe for concurrent use and cheap: an atomic add or a histogram
// observation, no label built per call.
type Metrics struct {
	reg *prometheus.Registry

	createSeconds *prometheus.HistogramVec
	creates       *prometheus.CounterVec
	turns         *prometheus.CounterVec
	turnSeconds   prometheus.Histogram
	// turnsBy are the turn counters of the ACP stop reasons, made once.
	turnsBy        map[string]prometheus.Counter
	events         prometheus.Counter
	commitSeconds  prometheus.Histogram
	commitEvents   prometheus.Histogram
	subscribers    *prometheus.GaugeVec
	sessionStreams prometheus.Gauge
	changeStreams  prometheus.Gauge
	permWait       *prometheus.HistogramVec
	exits          *prometheus.CounterVec
	// modelCalls are the gateway's model calls (usage.go).
	modelCalls *modelCalls
}

var (
	_ session.Observer  = (*Metrics)(nil)
	_ eventlog.Observer = (*Metrics)(nil)
)

// New returns the daemon's metrics, registered with a registry of their
// own along with the Go runtime and process collectors.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.createSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "session_create_duration_seconds",
		Help:    "Time from a create request to its agent's finished handshake (or its failure), by sandbox provider.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"sandbox"})
	m.creates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "session_creates_total",
		Help: "Sessions created, by sandbox provider and result (ok: the agent is active; failed: it did not start).",
	}, []string{"sandbox", "result"})
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "turns_total",
		Help: "Turns ended, by stop reason (end_turn, cancelled, error, max_tokens, ...).",
	}, []string{"stop_reason"})
	m.turnSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "turn_duration_seconds",
		Help:    "Time from turn_started to turn_ended of the turns this daemon started.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
	})
	m.turnsBy = make(map[string]prometheus.Counter)
	for _, r := range []string{berth.TurnEndTurn, berth.TurnCancelled, berth.TurnError, berth.TurnMaxTokens,
		berth.TurnMaxTurnRequests, berth.TurnRefusal} {
		m.turnsBy[r] = m.turns.WithLabelValues(r)
	}
	m.events = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "events_appended_total",
		Help: "Events committed to the sessions' logs.",
	})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "store_commit_duration_seconds",
		Help:    "Time of one store transaction of the event log's writer (a batch of events).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	})
	m.commitEvents = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "store_commit_batch_events",
		Help:    "Events written by one store transaction of the event log's writer.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
	})
	m.subscribers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "sse_subscribers",
		Help: "Open event streams of the API, by stream (session: one session's events; all: the all-sessions stream).",
	}, []string{"stream"})
	m.sessionStreams = m.subscribers.WithLabelValues("session")
	m.changeStreams = m.subscribers.WithLabelValues("all")
	m.permWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "permission_wait_seconds",
		Help:    "Time from an agent's permission request to its decision, by who decided (user, policy, timeout, cancel).",
		Buckets: []float64{.001, .01, .1, .5, 1, 5, 15, 30, 60, 120, 300, 600},
	}, []string{"decided_by"})
	m.exits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "agent_exits_total",
		Help: "Agents gone, by the session's stop reason and failure kind (\"\" when none).",
	}, []string{"reason", "failure"})

	m.modelCalls = newModelCalls()

	m.reg.MustRegister(m.createSeconds, m.creates, m.turns, m.turnSeconds, m.events, m.commitSeconds,
		m.commitEvents, m.subscribers, m.permWait, m.exits, m.modelCalls.calls, m.modelCalls.tokens, m.modelCalls.cost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.Census != nil {
		m.reg.MustRegister(newCensusCollector(o.Census))
	}
	if o.Hooks != nil {
		m.reg.MustRegister(newHooksCollector(o.Hooks))
	}
	return m
}

// Registry is the registry of the daemon's metrics (for tests and tools).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics, when asked). A scrape that fails answers 500 with the error.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
}

// SessionCreated implements session.Observer.
func (m *Metrics) SessionCreated(sandbox string, ok bool, took time.Duration) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	m.creates.WithLabelValues(sandbox, result).Inc()
	m.createSeconds.WithLabelValues(sandbox).Observe(took.Seconds())
}

// TurnEnded implements session.Observer.
func (m *Metrics) TurnEnded(stopReason string, took time.Duration) {
	c, ok := m.turnsBy[stopReason]
	if !ok {
		// A stop reason of a newer ACP: still counted.
		c = m.turns.WithLabelValues(stopReason)
	}
	c.Inc()
	if took >= 0 {
		m.turnSeconds.Observe(took.Seconds())
	}
}

// PermissionDecided implements session.Observer.
func (m *Metrics) PermissionDecided(decidedBy string, waited time.Duration) {
	m.permWait.WithLabelValues(decidedBy).Observe(max(waited, 0).Seconds())
}

// AgentExited implements session.Observer.
func (m *Metrics) AgentExited(reason berth.StopReason, failureKind string) {
	m.exits.WithLabelValues(string(reason), failureKind).Inc()
}

// Committed implements eventlog.Observer: on the writer goroutine, once
// per transaction.
func (m *Metrics) Committed(events int, took time.Duration) {
	m.events.Add(float64(events))
	m.commitSeconds.Observe(took.Seconds())
	m.commitEvents.Observe(float64(events))
}
