package egress_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth/gateway/egress"
	"github.com/berth-sh/berth/internal/testenv"
)

// asker is a Hooks.Ask whose questions the test answers.
type asker struct {
	questions chan askCall

	mu    sync.Mutex
	asked []string
	added []string
}

// askCall is one question put to the asker.
type askCall struct {
	host   string
	port   int
	ctx    context.Context
	answer chan egress.Decision
}

func newAsker() *asker { return &asker{questions: make(chan askCall, 16)} }

func (a *asker) hooks(d *denials) egress.Hooks {
	return egress.Hooks{
		Denied: d.hook,
		Ask: func(ctx context.Context, sessionID, host string, port int) (egress.Decision, error) {
			a.mu.Lock()
			a.asked = append(a.asked, host)
			a.mu.Unlock()
			c := askCall{host: host, port: port, ctx: ctx, answer: make(chan egress.Decision, 1)}
			a.questions <- c
			select {
			case d := <-c.answer:
				return d, nil
			case <-ctx.Done():
				return egress.Reject, ctx.Err()
			}
		},
		Allowed: func(sessionID, entry string) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.added = append(a.added, sessionID+" "+entry)
		},
	}
}

// next returns the next question, failing after the deadline.
func (a *asker) next(t *testing.T) askCall {
	t.Helper()
	select {
	case c := <-a.questions:
		return c
	case <-time.After(deadline):
		t.Fatal("no question was asked")
	}
	return askCall{}
}

// counts returns how many questions were asked and the entries added.
func (a *asker) counts() (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.asked), append([]string(nil), a.added...)
}

// askSession serves an asking, empty list over the names of names.
func askSession(t *testing.T, opts egress.Options) (served, *asker, *denials, *echoServer) {
	echo := newEcho(t)
	fn := names(echo)
	opts.Resolver, opts.Dialer = fn, fn
	a, d := newAsker(), &denials{}
	return serve(t, opts, allowList(true), a.hooks(d)), a, d, echo
}

func TestAskAllowOnceLetsOneConnectionThrough(t *testing.T) {
	s, a, d, _ := askSession(t, egress.Options{})
	for range 2 {
		pending := connectAsync(t, s.addr, "a.example.com:443")
		q := a.next(t)
		if q.host != "a.example.com" || q.port != 443 {
			t.Fatalf("asked about %s:%d", q.host, q.port)
		}
		q.answer <- egress.AllowOnce
		tc := pending.wait(t)
		tc.wantStatus(t, http.StatusOK)
		tc.roundTrip(t, "once")
	}
	if n, added := a.counts(); n != 2 || len(added) != 0 {
		t.Fatalf("%d questions, added %q; want 2 questions (each connection asks), nothing added", n, added)
	}
	if len(s.Policy().Allow) != 0 || len(d.list()) != 0 {
		t.Fatalf("policy %+v, denials %q", s.Policy(), d.list())
	}
}

func TestAskAllowForTheSessionAddsTheHost(t *testing.T) {
	s, a, d, _ := askSession(t, egress.Options{})
	pending := connectAsync(t, s.addr, "a.example.com:443")
	a.next(t).answer <- egress.AllowSession
	tc := pending.wait(t)
	tc.wantStatus(t, http.StatusOK)
	tc.roundTrip(t, "session")
	// Now on the list: no more questions for it.
	connect(t, s.addr, "a.example.com:443").wantStatus(t, http.StatusOK)
	if n, added := a.counts(); n != 1 || !slices.Equal(added, []string{"ses_1 a.example.com:443"}) {
		t.Fatalf("%d questions, added %q", n, added)
	}
	if p := s.Policy(); !slices.Equal(p.Allow, []string{"a.example.com:443"}) || !p.Ask {
		t.Fatalf("policy %+v", p)
	}
	if len(d.list()) != 0 {
		t.Fatalf("denials %q", d.list())
	}
}

func TestAskRejectRefusesAndIsRememberedForTheWindow(t *testing.T) {
	clk := newClock()
	s, a, d, echo := askSession(t, egress.Options{Now: clk.Now})
	pending := connectAsync(t, s.addr, "a.example.com:443")
	a.next(t).answer <- egress.Reject
	pending.wait(t).wantStatus(t, http.StatusForbidden, "refused when asked")
	if len(d.list()) != 0 {
		t.Fatalf("a question's refusal was also a denial: %q", d.list())
	}
	// Retries within the window are refused without a question, told once.
	for range 3 {
		connect(t, s.addr, "a.example.com:443").wantStatus(t, http.StatusForbidden, "refused when asked")
	}
	if n, _ := a.counts(); n != 1 {
		t.Fatalf("%d questions, want 1", n)
	}
	if got := d.list(); !slices.Equal(got, []string{"ses_1 a.example.com:443"}) {
		t.Fatalf("denials %q", got)
	}
	// After the window it is asked again.
	clk.Advance(time.Minute)
	pending = connectAsync(t, s.addr, "a.example.com:443")
	a.next(t).answer <- egress.AllowOnce
	pending.wait(t).wantStatus(t, http.StatusOK)
	// The server counts a connection on its own goroutine, after the
	// proxy's dial has returned.
	testenv.WaitFor(t, deadline, "the server reached once", func() bool { return echo.accepted.Load() == 1 })
}

func TestAskWithNoAnswerTimesOut(t *testing.T) {
	s, a, _, _ := askSession(t, egress.Options{AskTimeout: 50 * time.Millisecond})
	pending := connectAsync(t, s.addr, "a.example.com:443")
	q := a.next(t)
	pending.wait(t).wantStatus(t, http.StatusForbidden, "no answer")
	if q.ctx.Err() == nil {
		t.Fatal("the question's context is still live after the timeout")
	}
}

func TestConnectionsToOneHostShareOneQuestion(t *testing.T) {
	s, a, _, _ := askSession(t, egress.Options{})
	first := connectAsync(t, s.addr, "a.example.com:443")
	q := a.next(t)
	second := connectAsync(t, s.addr, "a.example.com:443")
	other := connectAsync(t, s.addr, "pypi.org:443")
	q2 := a.next(t)
	if q2.host != "pypi.org" {
		t.Fatalf("second question about %s", q2.host)
	}
	waitFor(t, "the second connection to join the first's question", func() bool {
		return egress.Waiting(s.Session, "a.example.com", 443) == 2
	})
	q.answer <- egress.AllowOnce
	q2.answer <- egress.Reject
	first.wait(t).wantStatus(t, http.StatusOK)
	other.wait(t).wantStatus(t, http.StatusForbidden)
	second.wait(t).wantStatus(t, http.StatusOK)
	if n, _ := a.counts(); n != 2 {
		t.Fatalf("%d questions, want 2", n)
	}
}

func TestAskNeverPutsTheHostsOwnAddresses(t *testing.T) {
	s, a, d, _ := askSession(t, egress.Options{})
	for _, target := range []string{"127.0.0.1:7380", "[::1]:7380", "169.254.169.254:80", "10.0.0.1:443"} {
		connect(t, s.addr, target).wantStatus(t, http.StatusForbidden, "never a question")
	}
	if n, _ := a.counts(); n != 0 {
		t.Fatalf("%d questions about the host's addresses", n)
	}
	if len(d.list()) != 4 {
		t.Fatalf("denials %q, want 4", d.list())
	}
}

func TestCloseEndsQuestions(t *testing.T) {
	echo := newEcho(t)
	fn := names(echo)
	a, d := newAsker(), &denials{}
	p := egress.New(egress.Options{Resolver: fn, Dialer: fn})
	s, err := p.Session("ses_1", allowList(true), a.hooks(d))
	if err != nil {
		t.Fatal(err)
	}
	// The session mounted on a server of the caller's, not its own.
	srv := &http.Server{Handler: s}
	ln := listen(t)
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(ln) }()
	defer func() { srv.Close(); <-served }()
	pending := connectAsync(t, ln.Addr().String(), "a.example.com:443")
	q := a.next(t)
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(deadline):
		t.Fatal("Close did not return while a question was pending")
	}
	if q.ctx.Err() == nil {
		t.Fatal("the question's context outlived Close")
	}
	if tc := pending.wait(t); tc.status == http.StatusOK {
		t.Fatal("a connection went through a closed proxy")
	}
}

func TestASecondCloseWaitsForTheFirst(t *testing.T) {
	echo := newEcho(t)
	fn := names(echo)
	sawEnd, release := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	// A hook that returns a while after its context ended.
	hooks := egress.Hooks{Ask: func(ctx context.Context, _, _ string, _ int) (egress.Decision, error) {
		<-ctx.Done()
		close(sawEnd)
		<-release
		returned.Store(true)
		return egress.Reject, ctx.Err()
	}}
	p := egress.New(egress.Options{Resolver: fn, Dialer: fn})
	s, err := p.Session("ses_1", allowList(true), hooks)
	if err != nil {
		t.Fatal(err)
	}
	pending := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodConnect, "a.example.com:443", nil))
		pending <- w.Code
	}()
	waitFor(t, "the question", func() bool { return egress.Waiting(s, "a.example.com", 443) == 1 })
	first := make(chan struct{})
	go func() { s.Close(); close(first) }()
	<-sawEnd
	second := make(chan struct{})
	go func() { p.Close(); close(second) }()
	go close(release)
	select {
	case <-second:
	case <-time.After(deadline):
		t.Fatal("the second Close did not return")
	}
	if !returned.Load() {
		t.Fatal("the second Close returned while the first still waited for a question")
	}
	<-first
	if code := <-pending; code != http.StatusServiceUnavailable {
		t.Fatalf("the connection waiting for the question: %d, want 503", code)
	}
}
