package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway"
	"github.com/berth-sh/berth/hooks"
	"github.com/berth-sh/berth/session"
)

// census is a fixed census for the tests.
func census(context.Context) (session.Census, error) {
	return session.Census{Sessions: []session.SessionCount{
		{State: berth.StateActive, Badge: berth.BadgeRunning, Agent: "demo", Sessions: 2},
		{State: berth.StateStopped, Badge: berth.BadgeFailed, Agent: "claude", Sessions: 1},
	}, QueuePending: 3, PermissionsPending: 1}, nil
}

func newTest() *Metrics {
	return New(Options{Census: census, Hooks: func() hooks.Counters { return hooks.Counters{Enqueued: 4, Delivered: 3, Retried: 2, Failed: 1} }})
}

// Every family follows Prometheus' naming conventions (the client's linter:
// units in names, _total counters, no camelCase, help on each).
func TestFamiliesPassTheLinter(t *testing.T) {
	m := newTest()
	m.SessionCreated("host", true, time.Second)
	m.TurnEnded(berth.TurnEndTurn, time.Second)
	m.PermissionDecided(berth.DecidedByUser, time.Second)
	m.AgentExited(berth.StopAgentCrashed, berth.FailProcessExit)
	m.Committed(3, time.Millisecond)
	m.ModelCalled("claude", gateway.Call{Upstream: "anthropic", Model: "m", InputTokens: 1, CostUSD: 0.5})
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// The observers' calls land in their families, with their labels.
func TestObserversFeedTheirFamilies(t *testing.T) {
	m := newTest()
	m.SessionCreated("bwrap", true, 20*time.Millisecond)
	m.SessionCreated("bwrap", false, time.Second)
	m.TurnEnded(berth.TurnCancelled, time.Second)
	m.TurnEnded("a_newer_reason", 2*time.Second)
	// A turn a previous daemon started: counted, not timed.
	m.TurnEnded(berth.TurnEndTurn, -1)
	m.PermissionDecided(berth.DecidedByTimeout, 5*time.Minute)
	m.AgentExited(berth.StopUserRequested, "")
	m.AgentExited(berth.StopAgentCrashed, berth.FailProcessExit)
	m.AgentExited(berth.StopAgentCrashed, berth.FailProcessExit)
	m.Committed(7, time.Millisecond)
	m.Committed(5, time.Millisecond)

	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"creates ok", testutil.ToFloat64(m.creates.WithLabelValues("bwrap", "ok")), 1},
		{"creates failed", testutil.ToFloat64(m.creates.WithLabelValues("bwrap", "failed")), 1},
		{"turns cancelled", testutil.ToFloat64(m.turns.WithLabelValues(berth.TurnCancelled)), 1},
		{"turns newer", testutil.ToFloat64(m.turns.WithLabelValues("a_newer_reason")), 1},
		{"turns end_turn", testutil.ToFloat64(m.turns.WithLabelValues(berth.TurnEndTurn)), 1},
		{"exits crashed", testutil.ToFloat64(m.exits.WithLabelValues(string(berth.StopAgentCrashed), berth.FailProcessExit)), 2},
		{"exits user", testutil.ToFloat64(m.exits.WithLabelValues(string(berth.StopUserRequested), "")), 1},
		{"events", testutil.ToFloat64(m.events), 12},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	want := `
# HELP berth_turn_duration_seconds Time from turn_started to turn_ended of the turns this daemon started.
# TYPE berth_turn_duration_seconds histogram
berth_turn_duration_seconds_bucket{le="0.05"} 0
berth_turn_duration_seconds_bucket{le="0.1"} 0
berth_turn_duration_seconds_bucket{le="0.25"} 0
berth_turn_duration_seconds_bucket{le="0.5"} 0
berth_turn_duration_seconds_bucket{le="1"} 1
berth_turn_duration_seconds_bucket{le="2.5"} 2
berth_turn_duration_seconds_bucket{le="5"} 2
berth_turn_duration_seconds_bucket{le="10"} 2
berth_turn_duration_seconds_bucket{le="30"} 2
berth_turn_duration_seconds_bucket{le="60"} 2
berth_turn_duration_seconds_bucket{le="120"} 2
berth_turn_duration_seconds_bucket{le="300"} 2
berth_turn_duration_seconds_bucket{le="600"} 2
berth_turn_duration_seconds_bucket{le="1800"} 2
berth_turn_duration_seconds_bucket{le="+Inf"} 2
berth_turn_duration_seconds_sum 3
berth_turn_duration_seconds_count 2
# HELP berth_store_commit_batch_events Events written by one store transaction of the event log's writer.
# TYPE berth_store_commit_batch_events histogram
berth_store_commit_batch_events_bucket{le="1"} 0
berth_store_commit_batch_events_bucket{le="2"} 0
berth_store_commit_batch_events_bucket{le="4"} 0
berth_store_commit_batch_events_bucket{le="8"} 2
berth_store_commit_batch_events_bucket{le="16"} 2
berth_store_commit_batch_events_bucket{le="32"} 2
berth_store_commit_batch_events_bucket{le="64"} 2
berth_store_commit_batch_events_bucket{le="128"} 2
berth_store_commit_batch_events_bucket{le="256"} 2
berth_store_commit_batch_events_bucket{le="512"} 2
berth_store_commit_batch_events_bucket{le="1024"} 2
berth_store_commit_batch_events_bucket{le="+Inf"} 2
berth_store_commit_batch_events_sum 12
berth_store_commit_batch_events_count 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"berth_turn_duration_seconds", "berth_store_commit_batch_events"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.permWait); n != 1 {
		t.Errorf("permission wait series = %d, want 1", n)
	}
}

// The scrape-time families say what the census and the hooks' counters say.
func TestScrapeTimeFamilies(t *testing.T) {
	m := newTest()
	want := `
# HELP berth_sessions Sessions as the API lists them, by state, badge and agent.
# TYPE berth_sessions gauge
berth_sessions{agent="claude",badge="failed",state="stopped"} 1
berth_sessions{agent="demo",badge="running",state="active"} 2
# HELP berth_queue_pending_prompts Prompts waiting in the input queues of the live sessions.
# TYPE berth_queue_pending_prompts gauge
berth_queue_pending_prompts 3
# HELP berth_permissions_pending Permission requests of the live sessions awaiting a decision.
# TYPE berth_permissions_pending gauge
berth_permissions_pending 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"berth_sessions", "berth_queue_pending_prompts", "berth_permissions_pending"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(m.Registry(), "berth_hook_deliveries_total"); got != 4 {
		t.Errorf("hook delivery series = %d, want 4", got)
	}
}

// A census that fails fails the scrape: a 500, never a scrape that says
// there are no sessions.
func TestAFailedCensusFailsTheScrape(t *testing.T) {
	m := New(Options{Census: func(context.Context) (session.Census, error) {
		return session.Census{}, berth.Errorf(berth.EUnavailable, "store down")
	}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "store down") {
		t.Fatalf("scrape = %d %s", rec.Code, rec.Body)
	}
}

// fakeService opens streams that say whether they were closed.
type fakeService struct {
	berth.SessionService
	closed int
}

type fakeEvents struct{ s *fakeService }

func (fakeEvents) Next(ctx context.Context) ([]berth.Event, error) { return nil, ctx.Err() }
func (f fakeEvents) Close()                                        { f.s.closed++ }

type fakeChanges struct{ s *fakeService }

func (fakeChanges) Next(ctx context.Context) ([]berth.SessionChange, error) { return nil, ctx.Err() }
func (f fakeChanges) Close()                                                { f.s.closed++ }

func (f *fakeService) StreamEvents(_ context.Context, id string, _ int64) (berth.EventStream, error) {
	if id == "ses_missing" {
		return nil, berth.Errorf(berth.ENotFound, "no such session")
	}
	return fakeEvents{f}, nil
}

func (f *fakeService) StreamChanges(context.Context, string) (berth.ChangeStream, error) {
	return fakeChanges{f}, nil
}

// An open stream counts once, until it is closed, however often it is
// closed; a stream refused is never counted.
func TestStreamsAreCountedWhileOpen(t *testing.T) {
	m := newTest()
	fake := &fakeService{}
	svc := m.CountStreams(fake)
	ctx := context.Background()
	a, _ := svc.StreamEvents(ctx, "ses_1", 0)
	b, _ := svc.StreamEvents(ctx, "ses_2", 0)
	all, _ := svc.StreamChanges(ctx, "")
	if _, err := svc.StreamEvents(ctx, "ses_missing", 0); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("the service's error is lost: %v", err)
	}
	gauge := func(stream string) float64 { return testutil.ToFloat64(m.subscribers.WithLabelValues(stream)) }
	if gauge("session") != 2 || gauge("all") != 1 {
		t.Fatalf("open: session %v all %v", gauge("session"), gauge("all"))
	}
	a.Close()
	a.Close()
	all.Close()
	if gauge("session") != 1 || gauge("all") != 0 || fake.closed != 3 {
		t.Fatalf("closed: session %v all %v, the service's streams closed %d times", gauge("session"), gauge("all"), fake.closed)
	}
	b.Close()
	if gauge("session") != 0 {
		t.Fatalf("all closed: session %v", gauge("session"))
	}
}

// docs/api.md lists every berth_ family the daemon exports, and no other.
func TestTheDocsListEveryFamily(t *testing.T) {
	m := newTest()
	m.SessionCreated("host", true, time.Second)
	m.PermissionDecided(berth.DecidedByUser, time.Second)
	m.AgentExited(berth.StopUserRequested, "")
	m.ModelCalled("claude", gateway.Call{Upstream: "anthropic", Model: "m", InputTokens: 1})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "berth_") {
			exported = append(exported, f.GetName())
		}
	}
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Metrics")
	section, _, _ = strings.Cut(section, "\n## ")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(berth_[a-z_]+)`").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(exported)
	slices.Sort(documented)
	if !slices.Equal(exported, documented) {
		t.Errorf("exported %v\ndocumented %v", exported, documented)
	}
}

// The event log's writer pays this once per committed batch.
func BenchmarkCommitted(b *testing.B) {
	m := newTest()
	for b.Loop() {
		m.Committed(64, time.Millisecond)
	}
}

// A session pays this once per turn.
func BenchmarkTurnEnded(b *testing.B) {
	m := newTest()
	for b.Loop() {
		m.TurnEnded(berth.TurnEndTurn, time.Second)
	}
}
