package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-sh/berth/hooks"
	"github.com/berth-sh/berth/session"
)

// censusCollector computes the session gauges at scrape time from the
// manager's census, so they always agree with what the API lists.
type censusCollector struct {
	census             func(ctx context.Context) (session.Census, error)
	sessions           *prometheus.Desc
	queuePending       *prometheus.Desc
	permissionsPending *prometheus.Desc
}

func newCensusCollector(census func(ctx context.Context) (session.Census, error)) *censusCollector {
	return &censusCollector{
		census: census,
		sessions: prometheus.NewDesc(namespace+"_sessions",
			"Sessions as the API lists them, by state, badge and agent.", []string{"state", "badge", "agent"}, nil),
		queuePending: prometheus.NewDesc(namespace+"_queue_pending_prompts",
			"Prompts waiting in the input queues of the live sessions.", nil, nil),
		permissionsPending: prometheus.NewDesc(namespace+"_permissions_pending",
			"Permission requests of the live sessions awaiting a decision.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *censusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.queuePending
	ch <- c.permissionsPending
}

// Collect implements prometheus.Collector. A census that fails makes the
// scrape fail (an invalid metric), rather than report no sessions.
func (c *censusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	census, err := c.census(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.sessions, err)
		return
	}
	for _, n := range census.Sessions {
		ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(n.Sessions),
			string(n.State), string(n.Badge), n.Agent)
	}
	ch <- prometheus.MustNewConstMetric(c.queuePending, prometheus.GaugeValue, float64(census.QueuePending))
	ch <- prometheus.MustNewConstMetric(c.permissionsPending, prometheus.GaugeValue, float64(census.PermissionsPending))
}

// hooksCollector exports the hooks service's running totals.
type hooksCollector struct {
	counters   func() hooks.Counters
	deliveries *prometheus.Desc
}

func newHooksCollector(counters func() hooks.Counters) *hooksCollector {
	return &hooksCollector{counters: counters,
		deliveries: prometheus.NewDesc(namespace+"_hook_deliveries_total",
			"Hook deliveries since the daemon started, by result (enqueued: put in the outbox; delivered; "+
				"retried: an attempt failed and will be tried again; failed: given up).", []string{"result"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *hooksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.deliveries }

// Collect implements prometheus.Collector.
func (c *hooksCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.counters()
	for _, r := range []struct {
		result string
		v      int64
	}{{"enqueued", n.Enqueued}, {"delivered", n.Delivered}, {"retried", n.Retried}, {"failed", n.Failed}} {
		ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.CounterValue, float64(r.v), r.result)
	}
}
