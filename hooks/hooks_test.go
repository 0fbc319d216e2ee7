package hooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/changefeed"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/store/sqlite"
)

// env is a real SQLite store, a change feed and the Sessions the hooks
// read them through.
type env struct {
	t     testing.TB
	store testStore
	feed  *changefeed.Feed
	svc   *Service
}

// testStore is a store with its outbox.
type testStore interface {
	berth.Store
	berth.HookStore
}

// GetSession implements Sessions from the store.
func (e *env) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	return e.store.GetSession(ctx, id)
}

// ListSessions implements Sessions from the store.
func (e *env) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	return e.store.ListSessions(ctx, f)
}

// StreamChanges implements Sessions from the feed.
func (e *env) StreamChanges(ctx context.Context, last string) (berth.ChangeStream, error) {
	return e.feed.Subscribe(last)
}

// newEnv opens a store in a fresh directory.
func newEnv(t testing.TB) *env {
	t.Helper()
	return openEnv(t, t.TempDir())
}

// openEnv opens the store kept in dir.
func openEnv(t testing.TB, dir string) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "berth.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{t: t, store: st, feed: changefeed.New(0)}
}

// testOptions are fast retries, for tests.
func testOptions() Options {
	return Options{RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond, PollInterval: 10 * time.Millisecond,
		Owner: "node_test", Logger: slog.New(slog.DiscardHandler)}
}

// start opens a service over the env with hooks and opts.
func (e *env) start(opts Options, hooks ...Hook) *Service {
	e.t.Helper()
	opts.Store = e.store
	for i := range hooks {
		hooks[i].Index = i
		if hooks[i].Name == "" {
			hooks[i].Name = "hook-" + strconv.Itoa(i)
		}
	}
	opts.Hooks = hooks
	svc, err := New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := svc.Open(context.Background(), e); err != nil {
		e.t.Fatal(err)
	}
	e.svc = svc
	e.t.Cleanup(func() { e.stop() })
	return svc
}

// stop closes the service, which must stop within 5 s.
func (e *env) stop() {
	if e.svc == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.svc.Close(ctx); err != nil {
		e.t.Errorf("close: %v", err)
	}
	e.svc = nil
}

// session stores an active session of agent with labels.
func (e *env) session(id, agent string, labels map[string]string) {
	e.t.Helper()
	now := time.Now().UTC()
	s := &berth.Session{ID: id, Agent: agent, State: berth.StateActive, Badge: berth.BadgeIdle, Labels: labels,
		Workspace: "/w/" + id, CreatedAt: now, UpdatedAt: now, LastActivityAt: now}
	if err := e.store.CreateSession(context.Background(), s); err != nil {
		e.t.Fatal(err)
	}
}

// emit commits events of the given types to a session's log and tells the
// service, as the event log's commit callback does.
func (e *env) emit(id string, types ...string) {
	e.t.Helper()
	last, err := e.store.LastSeq(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	var evs []berth.Event
	for i, typ := range types {
		ev := berth.NewEvent(id, "turn_1", typ, map[string]any{"n": last + int64(i) + 1})
		ev.Seq = last + int64(i) + 1
		evs = append(evs, ev)
	}
	if err := e.store.AppendEvents(context.Background(), evs); err != nil {
		e.t.Fatal(err)
	}
	if e.svc != nil {
		e.svc.Notify(id)
	}
}

// deliveries lists every delivery in state ("" all), oldest first.
func (e *env) deliveries(state string) []*berth.HookDelivery {
	e.t.Helper()
	page, err := e.store.ListHookDeliveries(context.Background(), berth.HookDeliveryFilter{State: state, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	out := page.Deliveries
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// waitFor polls cond until it holds or 30 s pass (a loaded machine under -race is slow).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, what, cond)
}

// request is what a test receiver got.
type request struct {
	header http.Header
	body   []byte
}

// receiver records requests and answers each with answer(n), n counting
// from 1.
type receiver struct {
	mu     sync.Mutex
	got    []request
	answer func(n int, r request) int
	srv    *httptest.Server
}

func newReceiver(t testing.TB, answer func(n int, r request) int) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := request{header: r.Header.Clone(), body: b}
		rc.mu.Lock()
		rc.got = append(rc.got, req)
		n := len(rc.got)
		rc.mu.Unlock()
		code := http.StatusOK
		if rc.answer != nil {
			code = rc.answer(n, req)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.got...)
}

// received decodes a request's body.
func received(t *testing.T, r request) (ev struct {
	Seq       int64           `json:"seq"`
	SessionID string          `json:"session_id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Session   *berth.Session  `json:"session"`
}) {
	t.Helper()
	if err := json.Unmarshal(r.body, &ev); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return ev
}

func TestURLHookSignatureVerifiable(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	const secret = "s3cret-for-test"
	e.start(testOptions(), Hook{URL: rc.srv.URL + "/hook/path?token=abc", Secret: secret, Events: []string{berth.EventTurnEnded}})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventAgentMessage, berth.EventTurnEnded)
	waitFor(t, "a request", func() bool { return len(rc.requests()) == 1 })
	r := rc.requests()[0]
	// What a receiver does, written without the package's own helpers.
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(r.body)
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); r.header.Get("X-Berth-Signature") != want {
		t.Fatalf("signature %q, want %q", r.header.Get("X-Berth-Signature"), want)
	}
	if r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Berth-Event") != berth.EventTurnEnded ||
		!strings.HasPrefix(r.header.Get("X-Berth-Delivery"), "dlv_") {
		t.Fatalf("headers %v", r.header)
	}
	// A hook gets no credential of the daemon's, whatever its URL.
	if r.header.Get("Authorization") != "" || r.header.Get("Cookie") != "" {
		t.Fatalf("the request carries credentials: %v", r.header)
	}
	ev := received(t, r)
	if ev.Seq != 2 || ev.SessionID != "ses_a" || ev.Type != berth.EventTurnEnded || ev.Session == nil || ev.Session.ID != "ses_a" {
		t.Fatalf("body %s", r.body)
	}
	if Verify(r.body, secret, r.header.Get("X-Berth-Signature")) != true || Verify(r.body, "other", r.header.Get("X-Berth-Signature")) {
		t.Fatal("Verify does not tell a good signature from a bad one")
	}
	waitFor(t, "delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	// The API never shows the secret or the URL's path and query.
	info, _ := json.Marshal(e.svc.Hooks())
	if strings.Contains(string(info), secret) || strings.Contains(string(info), "token=abc") || strings.Contains(string(info), "/hook/path") {
		t.Fatalf("hooks listing shows secrets: %s", info)
	}
}

func TestURLHookRetriedAfterTwo500s(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(n int, _ request) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	e.start(testOptions(), Hook{URL: rc.srv.URL, Events: []string{berth.EventPermissionRequested}})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventPermissionRequested)
	waitFor(t, "delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	reqs := rc.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	id := reqs[0].header.Get("X-Berth-Delivery")
	for i, r := range reqs {
		if r.header.Get("X-Berth-Delivery") != id || string(r.body) != string(reqs[0].body) {
			t.Fatalf("attempt %d is not the same delivery: %q", i+1, r.header.Get("X-Berth-Delivery"))
		}
	}
	d := e.deliveries(berth.DeliveryDelivered)[0]
	if d.ID != id || d.Attempts != 3 || d.DeliveredAt == nil || d.LastError != "" {
		t.Fatalf("delivery %+v", d)
	}
	if c := e.svc.Counters(); c.Retried != 2 || c.Delivered != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestURLHookGivesUp(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(int, request) int { return http.StatusBadGateway })
	opts := testOptions()
	opts.GiveUpAfter = 100 * time.Millisecond
	e.start(opts, Hook{URL: rc.srv.URL + "/secret-path", Events: []string{berth.EventTurnEnded}})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded, berth.EventTurnEnded)
	// The first fails for good, then the session's next one goes (and
	// fails too): a dead receiver does not hold a session's queue forever.
	waitFor(t, "both failed", func() bool { return len(e.deliveries(berth.DeliveryFailed)) == 2 })
	d := e.deliveries(berth.DeliveryFailed)[0]
	if !strings.Contains(d.LastError, "HTTP 502") || d.NextAttemptAt != nil || d.Attempts < 2 {
		t.Fatalf("failed delivery %+v", d)
	}
	if strings.Contains(d.LastError, "secret-path") {
		t.Fatalf("last_error quotes the url: %q", d.LastError)
	}
}

func TestOrderPerSession(t *testing.T) {
	e := newEnv(t)
	var failedOnce sync.Once
	rc := newReceiver(t, func(_ int, r request) int {
		ev := struct {
			Seq       int64  `json:"seq"`
			SessionID string `json:"session_id"`
		}{}
		_ = json.Unmarshal(r.body, &ev)
		code := http.StatusOK
		if ev.SessionID == "ses_a" && ev.Seq == 1 {
			// ses_a's first delivery fails once: its second must wait.
			failedOnce.Do(func() { code = http.StatusServiceUnavailable })
		}
		return code
	})
	e.start(testOptions(), Hook{URL: rc.srv.URL, Events: []string{berth.EventTurnStarted}})
	e.session("ses_a", "demo", nil)
	e.session("ses_b", "demo", nil)
	for range 5 {
		e.emit("ses_a", berth.EventTurnStarted)
		e.emit("ses_b", berth.EventTurnStarted)
	}
	waitFor(t, "all delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 10 })
	next := map[string]int64{"ses_a": 1, "ses_b": 1}
	for _, r := range rc.requests() {
		ev := received(t, r)
		if ev.Seq < next[ev.SessionID] {
			// A retry of the one that failed.
			if ev.SessionID == "ses_a" && ev.Seq == 1 {
				continue
			}
			t.Fatalf("%s seq %d arrived after seq %d", ev.SessionID, ev.Seq, next[ev.SessionID]-1)
		}
		if ev.Seq != next[ev.SessionID] && !(ev.SessionID == "ses_a" && ev.Seq == 1) {
			t.Fatalf("%s seq %d arrived before seq %d was delivered", ev.SessionID, ev.Seq, next[ev.SessionID])
		}
		if ev.SessionID == "ses_a" && ev.Seq == 1 && next["ses_a"] == 1 && len(rc.requests()) > 0 {
			// Counted when it succeeds: the second request for it.
		}
		next[ev.SessionID] = ev.Seq + 1
	}
	// ses_a's seq 1 was asked twice, and seq 2 only after the second time.
	var aSeqs []int64
	for _, r := range rc.requests() {
		if ev := received(t, r); ev.SessionID == "ses_a" {
			aSeqs = append(aSeqs, ev.Seq)
		}
	}
	if fmt.Sprint(aSeqs) != "[1 1 2 3 4 5]" {
		t.Fatalf("ses_a got %v, want [1 1 2 3 4 5]", aSeqs)
	}
}

func TestFilters(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.start(testOptions(),
		Hook{Name: "any", URL: rc.srv.URL, Events: []string{berth.EventTurnEnded}},
		Hook{Name: "demo-only", URL: rc.srv.URL, Events: []string{berth.EventTurnEnded}, Agent: "demo"},
		Hook{Name: "web-team", URL: rc.srv.URL, Events: []string{berth.EventTurnEnded, berth.EventSessionStopped},
			Labels: map[string]string{"team": "web"}},
	)
	e.session("ses_demo_web", "demo", map[string]string{"team": "web", "x": "y"})
	e.session("ses_claude_web", "claude", map[string]string{"team": "web"})
	e.session("ses_demo_ops", "demo", map[string]string{"team": "ops"})
	for _, id := range []string{"ses_demo_web", "ses_claude_web", "ses_demo_ops"} {
		e.emit(id, berth.EventAgentMessage, berth.EventTurnEnded, berth.EventSessionStopped)
	}
	want := []string{
		"any ses_claude_web turn_ended", "any ses_demo_ops turn_ended", "any ses_demo_web turn_ended",
		"demo-only ses_demo_ops turn_ended", "demo-only ses_demo_web turn_ended",
		"web-team ses_claude_web session_stopped", "web-team ses_claude_web turn_ended",
		"web-team ses_demo_web session_stopped", "web-team ses_demo_web turn_ended",
	}
	waitFor(t, "deliveries", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == len(want) })
	var got []string
	for _, d := range e.deliveries("") {
		got = append(got, d.Hook+" "+d.SessionID+" "+d.Event)
	}
	sortStrings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("deliveries\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(rc.requests()); n != len(want) {
		t.Fatalf("%d requests, want %d", n, len(want))
	}
}

// sortStrings sorts s in place.
func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestBadgeHook(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.session("ses_a", "demo", nil)
	e.start(testOptions(), Hook{URL: rc.srv.URL, Events: []string{"badge:waiting"}})
	publish := func(badge berth.Badge, lastSeq int64) {
		s, err := e.store.GetSession(context.Background(), "ses_a")
		if err != nil {
			t.Fatal(err)
		}
		s.Badge, s.LastSeq = badge, lastSeq
		b, _ := json.Marshal(s)
		e.feed.Publish(berth.ChangeSessionUpdated, b)
	}
	// Wait until the watcher recorded the first badge it saw.
	waitFor(t, "the first badge recorded", func() bool {
		c, ok, _ := e.store.GetHookCursor(context.Background(), "ses_a")
		return ok && c.Badge == berth.BadgeIdle
	})
	publish(berth.BadgeRunning, 3)
	publish(berth.BadgeWaiting, 4)
	publish(berth.BadgeWaiting, 4)
	waitFor(t, "a badge delivery", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	r := rc.requests()[0]
	ev := received(t, r)
	if r.header.Get("X-Berth-Event") != "badge:waiting" || ev.Type != "badge:waiting" || ev.Seq != 4 ||
		string(ev.Data) != `{"badge":"waiting","previous":"running"}` {
		t.Fatalf("badge delivery %s %s", r.header.Get("X-Berth-Event"), r.body)
	}
	// A restart that finds the session's badge changed meanwhile reports it.
	e.stop()
	publishStored := func(badge berth.Badge) {
		s, _ := e.store.GetSession(context.Background(), "ses_a")
		s.Badge = badge
		if err := e.store.UpdateSession(context.Background(), s, ""); err != nil {
			t.Fatal(err)
		}
	}
	publishStored(berth.BadgeRunning)
	e.start(testOptions(), Hook{URL: rc.srv.URL, Events: []string{"badge:waiting"}})
	waitFor(t, "running recorded", func() bool {
		c, _, _ := e.store.GetHookCursor(context.Background(), "ses_a")
		return c.Badge == berth.BadgeRunning
	})
	publish(berth.BadgeWaiting, 9)
	waitFor(t, "a second badge delivery", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 2 })
}

func TestNothingLostAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := openEnv(t, dir)
	rc := newReceiver(t, nil)
	hk := Hook{URL: rc.srv.URL, Events: []string{berth.EventTurnEnded}}
	e.start(testOptions(), hk)
	e.session("ses_a", "demo", nil)
	e.stop()
	// Committed while no service scanned: as after a crash right after
	// the commit.
	e.emit("ses_a", berth.EventTurnStarted, berth.EventTurnEnded)
	e.start(testOptions(), hk)
	waitFor(t, "delivered after the restart", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	if ev := received(t, rc.requests()[0]); ev.Seq != 2 {
		t.Fatalf("delivered seq %d", ev.Seq)
	}
}

func TestNewHookStartsFromNow(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.session("ses_old", "demo", nil)
	e.emit("ses_old", berth.EventTurnEnded)
	// A daemon without hooks, then one with: history is not replayed.
	e.start(testOptions())
	e.stop()
	e.start(testOptions(), Hook{URL: rc.srv.URL, Events: []string{berth.EventTurnEnded}})
	e.emit("ses_old", berth.EventTurnEnded)
	waitFor(t, "delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	if d := e.deliveries("")[0]; d.Seq != 2 || len(e.deliveries("")) != 1 {
		t.Fatalf("deliveries %+v", e.deliveries(""))
	}
}

func TestSlowReceiverBlocksOnlyItsOwnQueue(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	fast := newReceiver(t, nil)
	opts := testOptions()
	e.start(opts,
		Hook{Name: "slow", URL: slow.URL, Events: []string{berth.EventTurnEnded}, Timeout: time.Minute},
		Hook{Name: "fast", URL: fast.srv.URL, Events: []string{berth.EventTurnEnded}})
	e.session("ses_a", "demo", nil)
	e.session("ses_b", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded, berth.EventTurnEnded)
	e.emit("ses_b", berth.EventTurnEnded)
	waitFor(t, "the fast hook's deliveries", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 3 })
	// The slow hook holds one delivery per session in flight, and stops
	// promptly at shutdown, leaving them pending.
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- e.svc.Close(ctx)
	}()
	if err := <-closed; err != nil {
		t.Fatalf("close with a stuck receiver: %v", err)
	}
	e.svc = nil
	pending := e.deliveries(berth.DeliveryPending)
	if len(pending) != 3 {
		t.Fatalf("pending after shutdown: %d", len(pending))
	}
	for _, d := range pending {
		if d.Hook != "slow" || d.Attempts != 0 {
			t.Fatalf("pending %+v", d)
		}
	}
}

func TestCommandHook(t *testing.T) {
	// The daemon's own BERTH_* settings (a token, say) never reach a hook.
	t.Setenv("BERTH_SERVER_TOKEN", "daemon-token")
	e := newEnv(t)
	out := filepath.Join(t.TempDir(), "out")
	e.start(testOptions(), Hook{Command: "/bin/sh",
		Args:   []string{"-c", `cat > "$0.tmp" && printf '%s %s%s' "$BERTH_HOOK_EVENT" "$BERTH_HOOK_DELIVERY" "$BERTH_SERVER_TOKEN" > "$0.env" && mv "$0.tmp" "$0"`, out},
		Events: []string{berth.EventTurnEnded}})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded)
	waitFor(t, "delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	d := e.deliveries("")[0]
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(d.Body) {
		t.Fatalf("stdin %q, want the body %q", b, d.Body)
	}
	envb, _ := os.ReadFile(out + ".env")
	if string(envb) != "turn_ended "+d.ID {
		t.Fatalf("environment %q", envb)
	}
}

func TestCommandHookFailureRetried(t *testing.T) {
	e := newEnv(t)
	count := filepath.Join(t.TempDir(), "count")
	// Fails the first time (exit 3, saying why on stderr), then succeeds.
	script := `if [ -e "$0" ]; then exit 0; fi; touch "$0"; echo "no luck" >&2; exit 3`
	e.start(testOptions(), Hook{Command: "/bin/sh", Args: []string{"-c", script, count}, Events: []string{berth.EventTurnEnded}})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded)
	waitFor(t, "delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	if d := e.deliveries("")[0]; d.Attempts != 2 {
		t.Fatalf("attempts %d", d.Attempts)
	}
	if c := e.svc.Counters(); c.Retried != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestCommandHookTimeoutKillsGroup(t *testing.T) {
	e := newEnv(t)
	pids := filepath.Join(t.TempDir(), "pids")
	// The hook and a background child of it both hang.
	script := `sleep 300 & echo $! > "$0.tmp"; echo $$ >> "$0.tmp"; mv "$0.tmp" "$0"; sleep 300`
	opts := testOptions()
	opts.GiveUpAfter = time.Millisecond
	e.start(opts, Hook{Command: "/bin/sh", Args: []string{"-c", script, pids}, Events: []string{berth.EventTurnEnded}, Timeout: time.Second})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded)
	waitFor(t, "failed", func() bool { return len(e.deliveries(berth.DeliveryFailed)) == 1 })
	d := e.deliveries(berth.DeliveryFailed)[0]
	if !strings.Contains(d.LastError, "timed out after 1s") {
		t.Fatalf("last_error %q", d.LastError)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		// Killed and reaped: no such process (a zombie would still answer).
		waitFor(t, "process "+f+" gone", func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH })
	}
}

func TestRetentionPrunesDelivered(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	opts := testOptions()
	opts.KeepDelivered = 2
	opts.PruneEvery = 20 * time.Millisecond
	e.start(opts, Hook{URL: rc.srv.URL, Events: []string{berth.EventTurnEnded}})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded, berth.EventTurnEnded, berth.EventTurnEnded, berth.EventTurnEnded, berth.EventTurnEnded)
	waitFor(t, "all sent", func() bool { return len(rc.requests()) == 5 })
	waitFor(t, "pruned to the newest 2", func() bool {
		ds := e.deliveries("")
		return len(ds) == 2 && ds[0].Seq == 4 && ds[1].Seq == 5
	})
}

func TestTruncatesLargeEventData(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	opts := testOptions()
	opts.MaxEventBytes = 1024
	e.start(opts, Hook{URL: rc.srv.URL, Events: []string{berth.EventAgentMessage}})
	e.session("ses_a", "demo", nil)
	ev := berth.NewEvent("ses_a", "", berth.EventAgentMessage, map[string]string{"text": strings.Repeat("x", 100000)})
	ev.Seq = 1
	if err := e.store.AppendEvents(context.Background(), []berth.Event{ev}); err != nil {
		t.Fatal(err)
	}
	e.svc.Notify("ses_a")
	waitFor(t, "a request", func() bool { return len(rc.requests()) == 1 })
	r := rc.requests()[0]
	if len(r.body) > 8192 || !strings.Contains(string(r.body), `"truncated":true`) {
		t.Fatalf("body of %d bytes: %.300s", len(r.body), r.body)
	}
}

func TestSlowSessionHoldsBackOnlyItsQueue(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct {
			SessionID string `json:"session_id"`
			Seq       int64  `json:"seq"`
		}
		_ = json.Unmarshal(b, &ev)
		mu.Lock()
		got = append(got, fmt.Sprintf("%s/%d", ev.SessionID, ev.Seq))
		mu.Unlock()
		if ev.SessionID == "ses_slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	e.start(testOptions(), Hook{URL: srv.URL, Events: []string{berth.EventTurnEnded}, Timeout: time.Minute})
	e.session("ses_slow", "demo", nil)
	e.session("ses_b", "demo", nil)
	e.emit("ses_slow", berth.EventTurnEnded, berth.EventTurnEnded)
	e.emit("ses_b", berth.EventTurnEnded, berth.EventTurnEnded, berth.EventTurnEnded)
	waitFor(t, "ses_b delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 3 })
	mu.Lock()
	defer mu.Unlock()
	// ses_slow's second delivery was never sent while its first hangs.
	for _, g := range got {
		if g == "ses_slow/2" {
			t.Fatalf("ses_slow's next delivery went while its first hung: %v", got)
		}
	}
}

func TestScanPagesThroughALongLog(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, func(int, request) int { return http.StatusInternalServerError })
	opts := testOptions()
	opts.RetryBase, opts.RetryMax = time.Hour, time.Hour
	e.start(opts, Hook{URL: rc.srv.URL, Events: []string{berth.EventTurnEnded, berth.EventToolCall}})
	e.session("ses_a", "demo", nil)
	// 1,100 turn_ended (more than one page of one type), 50 tool_call and
	// 50 agent_message, mixed.
	var types []string
	want := map[int64]bool{}
	for i := range 1200 {
		typ := berth.EventTurnEnded
		switch {
		case i%24 == 5:
			typ = berth.EventToolCall
		case i%24 == 17:
			typ = berth.EventAgentMessage
		}
		if typ != berth.EventAgentMessage {
			want[int64(i+1)] = true
		}
		types = append(types, typ)
	}
	e.emit("ses_a", types...)
	waitFor(t, "the last delivery", func() bool {
		page, err := e.store.ListHookDeliveries(context.Background(), berth.HookDeliveryFilter{Limit: 1})
		return err == nil && len(page.Deliveries) == 1 && page.Deliveries[0].Seq == 1200
	})
	seen := map[int64]bool{}
	f := berth.HookDeliveryFilter{Limit: 1000}
	for {
		page, err := e.store.ListHookDeliveries(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Deliveries {
			if !want[d.Seq] || seen[d.Seq] {
				t.Fatalf("delivery of seq %d (%s)", d.Seq, d.Event)
			}
			seen[d.Seq] = true
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	if len(seen) != len(want) {
		t.Fatalf("%d deliveries, want %d", len(seen), len(want))
	}
}

func TestURLHookFollowsNoRedirect(t *testing.T) {
	e := newEnv(t)
	target := newReceiver(t, nil)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.srv.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	e.start(testOptions(), Hook{URL: redirect.URL, Secret: "k", Events: []string{berth.EventTurnEnded}})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded)
	waitFor(t, "a failed attempt", func() bool {
		ds := e.deliveries(berth.DeliveryPending)
		return len(ds) == 1 && ds[0].Attempts >= 1
	})
	if d := e.deliveries("")[0]; !strings.Contains(d.LastError, "HTTP 307") {
		t.Fatalf("last_error %q", d.LastError)
	}
	if n := len(target.requests()); n != 0 {
		t.Fatalf("the redirect was followed %d times", n)
	}
}

func TestFlushReadsALogAboutToBeDeleted(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, nil)
	e.start(testOptions(), Hook{URL: rc.srv.URL, Events: []string{berth.EventSessionStopped}})
	e.session("ses_a", "demo", nil)
	// Committed, and the log deleted before the scanner was told: what a
	// delete of a live session does, at its worst.
	svc := e.svc
	e.svc = nil
	e.emit("ses_a", berth.EventTurnEnded, berth.EventSessionStopped)
	e.svc = svc
	if err := e.svc.Flush(context.Background(), "ses_a"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.DeleteSession(context.Background(), "ses_a"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "session_stopped delivered", func() bool { return len(e.deliveries(berth.DeliveryDelivered)) == 1 })
	if ev := received(t, rc.requests()[0]); ev.Type != berth.EventSessionStopped || ev.Seq != 2 {
		t.Fatalf("delivered %s %d", ev.Type, ev.Seq)
	}
}

func TestShutdownKillsARunningCommandHook(t *testing.T) {
	e := newEnv(t)
	pids := filepath.Join(t.TempDir(), "pids")
	script := `echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; trap '' TERM; sleep 300`
	e.start(testOptions(), Hook{Command: "/bin/sh", Args: []string{"-c", script, pids}, Events: []string{berth.EventTurnEnded}, Timeout: 5 * time.Minute})
	e.session("ses_a", "demo", nil)
	e.emit("ses_a", berth.EventTurnEnded)
	waitFor(t, "the hook running", func() bool { _, err := os.Stat(pids); return err == nil })
	e.stop() // fails the test if Close takes over 5 s
	b, _ := os.ReadFile(pids)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("hook process %d still there after shutdown: %v", pid, err)
	}
	if ds := e.deliveries(berth.DeliveryPending); len(ds) != 1 || ds[0].Attempts != 0 {
		t.Fatalf("after shutdown: %+v", ds)
	}
}
