package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/berth-sh/berth"
)

// scrape reads /metrics through get and parses it as the Prometheus text
// format: a parse error fails the test.
func scrape(t *testing.T, get func() (*http.Response, error)) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("the scrape does not parse: %v", err)
	}
	return fams
}

// scrapeTCP scrapes the daemon's TCP address with its token.
func (s *server) scrapeTCP(t *testing.T) map[string]*dto.MetricFamily {
	return scrape(t, func() (*http.Response, error) {
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/metrics", nil)
		s.authorize(req)
		return http.DefaultClient.Do(req)
	})
}

// labelsOf renders a sample's labels as "k=v,k=v", in name order.
func labelsOf(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// values maps a family's samples (counter, gauge or histogram count) by
// their labels; samples at zero are left out, so that a label set never
// seen and one seen at zero compare alike.
func values(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f := fams[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var v float64
		switch {
		case m.Counter != nil:
			v = m.Counter.GetValue()
		case m.Gauge != nil:
			v = m.Gauge.GetValue()
		case m.Histogram != nil:
			v = float64(m.Histogram.GetSampleCount())
		}
		if v != 0 {
			out[labelsOf(m)] = v
		}
	}
	return out
}

// histSum is the sum of a histogram family's samples, over every label set.
func histSum(fams map[string]*dto.MetricFamily, name string) float64 {
	var sum float64
	if f := fams[name]; f != nil {
		for _, m := range f.GetMetric() {
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum
}

// apiView is what the API says, in the metrics' terms.
type apiView struct {
	sessions, turns, exits map[string]float64
	queue, perms, events   float64
}

// fromAPI reads the sessions, their transcripts and their logs' lengths
// through the API.
func fromAPI(t *testing.T, s *server) apiView {
	t.Helper()
	var page berth.SessionPage
	if st, err := s.api("GET", "/v1/sessions?limit=1000", nil, &page); st != 200 {
		t.Fatalf("list = %d %v", st, err)
	}
	v := apiView{sessions: map[string]float64{}, turns: map[string]float64{}, exits: map[string]float64{}}
	for _, ss := range page.Sessions {
		v.sessions[fmt.Sprintf("agent=%s,badge=%s,state=%s", ss.Agent, ss.Badge, ss.State)]++
		v.queue += float64(ss.Queue.Pending)
		v.perms += float64(ss.PendingPermissions)
		v.events += float64(ss.LastSeq)
		if ss.State == berth.StateStopped {
			kind := ""
			if ss.Failure != nil {
				kind = ss.Failure.Kind
			}
			v.exits[fmt.Sprintf("failure=%s,reason=%s", kind, ss.StopReason)]++
		}
		var tr struct{ Turns []berth.TranscriptTurn }
		if st, err := s.api("GET", "/v1/sessions/"+ss.ID+"/transcript", nil, &tr); st != 200 {
			t.Fatalf("transcript = %d %v", st, err)
		}
		for _, tt := range tr.Turns {
			if tt.StopReason != "" {
				v.turns["stop_reason="+tt.StopReason]++
			}
		}
	}
	return v
}

// agree says how the scrape differs from the API ("" when it does not).
func agree(fams map[string]*dto.MetricFamily, v apiView) string {
	var diffs []string
	cmp := func(what string, got, want any) {
		if fmt.Sprint(got) != fmt.Sprint(want) {
			diffs = append(diffs, fmt.Sprintf("%s: metrics %v, API %v", what, got, want))
		}
	}
	cmp("berth_sessions", values(fams, "berth_sessions"), v.sessions)
	cmp("berth_turns_total", values(fams, "berth_turns_total"), v.turns)
	cmp("berth_agent_exits_total", values(fams, "berth_agent_exits_total"), v.exits)
	cmp("berth_queue_pending_prompts", values(fams, "berth_queue_pending_prompts")[""], v.queue)
	cmp("berth_permissions_pending", values(fams, "berth_permissions_pending")[""], v.perms)
	cmp("berth_events_appended_total", values(fams, "berth_events_appended_total")[""], v.events)
	cmp("berth_store_commit_batch_events sum", histSum(fams, "berth_store_commit_batch_events"), v.events)
	return strings.Join(diffs, "\n")
}

// TestMetricsAgreeWithTheAPI drives sessions into every state and badge,
// turns to known stop reasons, a queue and a pending permission, and
// checks that a scrape says what the API says.
func TestMetricsAgreeWithTheAPI(t *testing.T) {
	home := t.TempDir()
	// "broken" exits before its handshake: a create that fails.
	conf := "[[agents]]\nname = \"broken\"\ncommand = \"/bin/false\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, home)

	create := func(mode string) string {
		t.Helper()
		sess := s.create(t, map[string]any{"permission_mode": mode})
		return sess.ID
	}
	prompt := func(id, text string, wait bool) berth.PromptResult {
		t.Helper()
		path := "/v1/sessions/" + id + "/prompts"
		if wait {
			path += "?wait=true"
		}
		var res berth.PromptResult
		if st, err := s.api("POST", path, map[string]any{"text": text}, &res); st != 200 && st != 202 {
			t.Fatalf("prompt %q = %d %v", text, st, err)
		}
		return res
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s\n%s", what, s.log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	get := func(id string) berth.Session {
		var sess berth.Session
		if st, err := s.api("GET", "/v1/sessions/"+id, nil, &sess); st != 200 {
			t.Fatalf("get = %d %v", st, err)
		}
		return sess
	}

	// waiting: a permission nobody answered.
	waiting := create(berth.PermAsk)
	prompt(waiting, "ask may I", false)
	waitFor("a pending permission", func() bool { return get(waiting).PendingPermissions == 1 })
	// answered: a permission the user decided, then end_turn.
	answered := create(berth.PermAsk)
	prompt(answered, "ask may I", false)
	waitFor("a pending permission", func() bool { return get(answered).PendingPermissions == 1 })
	var list struct{ Permissions []berth.Permission }
	if st, err := s.api("GET", "/v1/sessions/"+answered+"/permissions?state=pending", nil, &list); st != 200 || len(list.Permissions) != 1 {
		t.Fatalf("permissions = %d %v %v", st, err, list)
	}
	perms := list.Permissions
	if st, err := s.api("POST", "/v1/sessions/"+answered+"/permissions/"+perms[0].ID,
		map[string]any{"option_id": perms[0].Options[0].ID}, nil); st != 200 {
		t.Fatalf("decide = %d %v", st, err)
	}
	waitFor("the answered turn to end", func() bool { return get(answered).Badge == berth.BadgeIdle })
	// running, with two prompts queued behind its turn.
	busy := create(berth.PermApproveReads)
	prompt(busy, "echo hi", true)
	prompt(busy, "sleep 60000", false)
	waitFor("a running turn", func() bool { return get(busy).Badge == berth.BadgeRunning })
	prompt(busy, "echo one", false)
	prompt(busy, "echo two", false)
	// cancelled: a turn cancelled by the user.
	cancelled := create(berth.PermApproveReads)
	prompt(cancelled, "sleep 60000", false)
	waitFor("a running turn", func() bool { return get(cancelled).Badge == berth.BadgeRunning })
	if st, err := s.api("POST", "/v1/sessions/"+cancelled+"/cancel", nil, nil); st != 200 && st != 202 {
		t.Fatalf("cancel = %d %v", st, err)
	}
	waitFor("the cancelled turn to end", func() bool { return get(cancelled).Badge == berth.BadgeIdle })
	// stopped by its user, and failed: an agent that crashed.
	stopped := create(berth.PermApproveReads)
	if st, err := s.api("POST", "/v1/sessions/"+stopped+"/stop", nil, nil); st != 200 {
		t.Fatalf("stop = %d %v", st, err)
	}
	crashed := create(berth.PermApproveReads)
	prompt(crashed, "crash 3", false)
	waitFor("the crash", func() bool { return get(crashed).State == berth.StateStopped })

	var broken berth.Session
	if st, err := s.api("POST", "/v1/sessions", map[string]any{"agent": "broken", "sandbox": "host"}, &broken); st != 201 || broken.StopReason != berth.StopStartupFailed {
		t.Fatalf("create broken = %d %v %+v", st, err, broken)
	}

	deadline := time.Now().Add(30 * time.Second)
	for {
		diff := agree(s.scrapeTCP(t), fromAPI(t, s))
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics do not agree with the API:\n%s", diff)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fams := s.scrapeTCP(t)
	if v := fromAPI(t, s); v.queue != 2 || v.perms != 1 || len(v.sessions) < 5 || v.turns["stop_reason=cancelled"] != 1 {
		t.Fatalf("the test did not make what it meant to: %+v", v)
	}
	if got := values(fams, "berth_session_creates_total"); fmt.Sprint(got) != fmt.Sprint(map[string]float64{"result=ok,sandbox=host": 6, "result=failed,sandbox=host": 1}) {
		t.Errorf("berth_session_creates_total = %v, want 6 ok and 1 failed on host", got)
	}
	if got := values(fams, "berth_session_create_duration_seconds"); got["sandbox=host"] != 7 {
		t.Errorf("berth_session_create_duration_seconds count = %v, want 7 on host", got)
	}
	if got := values(fams, "berth_permission_wait_seconds"); got["decided_by=user"] != 1 {
		t.Errorf("berth_permission_wait_seconds count = %v, want one decided by the user", got)
	}
	if got := values(fams, "berth_turn_duration_seconds")[""]; got != fromAPI(t, s).turnsEnded() {
		t.Errorf("berth_turn_duration_seconds count = %v, want every ended turn", got)
	}
	for _, name := range []string{"berth_hook_deliveries_total", "berth_store_commit_duration_seconds",
		"go_goroutines", "process_cpu_seconds_total", "berth_sse_subscribers"} {
		if fams[name] == nil {
			t.Errorf("no %s in the scrape", name)
		}
	}
	for name := range fams {
		if !strings.HasPrefix(name, "berth_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("family %s is not berth_, go_ or process_", name)
		}
	}
}

// turnsEnded counts the ended turns the API shows.
func (v apiView) turnsEnded() float64 {
	var n float64
	for _, c := range v.turns {
		n += c
	}
	return n
}

// TestMetricsCountStreamSubscribers opens a session's stream and the
// all-sessions stream and sees each counted while open, and no longer
// once closed.
func TestMetricsCountStreamSubscribers(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	sess := s.create(t, nil)
	open := func(path string) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+s.addr+path, nil)
		s.authorize(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", path, resp, err)
		}
		// Read the first line: the stream is being served.
		go func() { _, _ = bufio.NewReader(resp.Body).ReadString('\n'); <-ctx.Done(); resp.Body.Close() }()
		return cancel
	}
	subscribers := func() map[string]float64 { return values(s.scrapeTCP(t), "berth_sse_subscribers") }
	waitSubs := func(want map[string]float64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for fmt.Sprint(subscribers()) != fmt.Sprint(want) {
			if time.Now().After(deadline) {
				t.Fatalf("berth_sse_subscribers = %v, want %v", subscribers(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitSubs(map[string]float64{})
	one := open("/v1/sessions/" + sess.ID + "/events/stream")
	two := open("/v1/sessions/" + sess.ID + "/events/stream")
	all := open("/v1/events/stream")
	waitSubs(map[string]float64{"stream=all": 1, "stream=session": 2})
	one()
	all()
	waitSubs(map[string]float64{"stream=session": 1})
	two()
	waitSubs(map[string]float64{})
}

// TestMetricsNeedTheTokenOnTCPAndNothingOnTheSocket: /metrics is behind
// the API's authentication.
func TestMetricsNeedTheTokenOnTCPAndNothingOnTheSocket(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	for _, auth := range []string{"", "Bearer wrong"} {
		req, _ := http.NewRequest("GET", "http://"+s.addr+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || strings.Contains(string(body), "berth_") {
			t.Fatalf("GET /metrics with %q = %d %s", auth, resp.StatusCode, body)
		}
	}
	if fams := s.scrapeTCP(t); fams["berth_sessions"] == nil && fams["berth_events_appended_total"] == nil {
		t.Fatalf("the scrape with the token has no berth families: %v", fams)
	}
	sock := filepath.Join(home, socketName)
	overSocket := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	fams := scrape(t, func() (*http.Response, error) { return overSocket.Get("http://berth/metrics") })
	if fams["berth_events_appended_total"] == nil {
		t.Fatalf("the scrape over the socket has no berth_events_appended_total")
	}
}
