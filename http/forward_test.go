package http

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// nodeToken is the node token of the test clusters.
const nodeToken = "node-token-9876543210"

// fakeCluster is a Cluster whose owners and nodes the test sets. One
// directory is shared by the nodes of a test; each node sees it through
// its own id (clusterOf).
type fakeCluster struct {
	mu     sync.Mutex
	owners map[string]string // session → node
	urls   map[string]string // node → advertise
	token  string
	nodes  []*berth.Node
	err    error // Owner's error, when set
}

// newFakeCluster returns an empty directory with the node token.
func newFakeCluster() *fakeCluster {
	return &fakeCluster{owners: map[string]string{}, urls: map[string]string{}, token: nodeToken}
}

// set makes node own session; "" makes it owned by none.
func (c *fakeCluster) set(session, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owners[session] = node
}

// place records where a node is reached.
func (c *fakeCluster) place(node, url string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.urls[node] = url
}

// nodeView is the Cluster of one node of a fakeCluster.
type nodeView struct {
	*fakeCluster
	self string
}

// clusterOf returns node self's view of c.
func (c *fakeCluster) clusterOf(self string) Cluster { return nodeView{c, self} }

func (v nodeView) Self() string  { return v.self }
func (v nodeView) Token() string { return v.token }
func (v nodeView) Owner(_ context.Context, id string) (string, string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return "", "", v.err
	}
	node := v.owners[id]
	return node, v.urls[node], nil
}
func (v nodeView) Nodes(context.Context) ([]*berth.Node, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.nodes, nil
}

// twoNodes starts node "a" and node "b" of one cluster, each with its own
// service and its own user token ("token-a", "token-b"); ses_1 is owned by
// a.
func twoNodes(t *testing.T) (c *fakeCluster, a, b *Server, fa, fb *fakeService) {
	t.Helper()
	c = newFakeCluster()
	fa, fb = newFakeService(), newFakeService()
	a = startServer(t, fa, ServerOptions{Token: "token-a", Cluster: c.clusterOf("a")}, "")
	b = startServer(t, fb, ServerOptions{Token: "token-b", Cluster: c.clusterOf("b")}, "")
	c.place("a", "http://"+a.Addr())
	c.place("b", "http://"+b.Addr())
	c.set("ses_1", "a")
	return c, a, b, fa, fb
}

// send makes a request over TCP to a server and returns its status, raw
// body and headers.
func send(t *testing.T, s *Server, method, path, body string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+s.Addr()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw, resp.Header
}

// decodeErr decodes an error answer.
func decodeErr(t *testing.T, raw []byte) errorObject {
	t.Helper()
	var b errorBody
	if err := json.Unmarshal(raw, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("not an error answer: %q (%v)", raw, err)
	}
	return b.Error
}

// calls returns how many service calls f got.
func calls(f *fakeService) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func TestForwardedPromptRunsOnTheOwner(t *testing.T) {
	_, a, b, fa, fb := twoNodes(t)
	// The client knows only b's token: a accepts the forward by the node
	// token alone.
	st, raw, _ := send(t, b, "POST", "/v1/sessions/ses_1/prompts", `{"text":"hi from b"}`, "Authorization", "Bearer token-b")
	if st != 202 {
		t.Fatalf("prompt through b: %d %s", st, raw)
	}
	var res berth.PromptResult
	if err := json.Unmarshal(raw, &res); err != nil || res.TurnID != "turn_1" {
		t.Fatalf("answer %s: %v", raw, err)
	}
	fa.mu.Lock()
	got := fa.lastPrompt.Text
	fa.mu.Unlock()
	if got != "hi from b" {
		t.Fatalf("the owner got prompt %q", got)
	}
	if n := calls(fb); n != 0 {
		t.Fatalf("the receiving node ran %d service calls itself", n)
	}
	// Reads are served where they arrive.
	if st, raw, _ := send(t, b, "GET", "/v1/sessions/ses_1", "", "Authorization", "Bearer token-b"); st != 200 {
		t.Fatalf("GET on b: %d %s", st, raw)
	}
	if n := calls(fa); n != 1 {
		t.Fatalf("the owner got %d calls, want the prompt alone", n)
	}
	_ = a
}

func TestForwardedWaitIsNotCut(t *testing.T) {
	// A prompt's ?wait=true, and the long poll of a turn, which only the
	// node running the turn can answer: both wait on the owner.
	for _, req := range []struct{ method, path, body string }{
		{"POST", "/v1/sessions/ses_1/prompts?wait=true", `{"text":"long"}`},
		{"GET", "/v1/sessions/ses_1/turns/turn_1", ""},
	} {
		_, _, b, fa, fb := twoNodes(t)
		fa.waitBlocks, fa.waitRelease = true, make(chan struct{})
		type answer struct {
			st  int
			raw []byte
		}
		done := make(chan answer, 1)
		go func() {
			st, raw, _ := send(t, b, req.method, req.path, req.body, "Authorization", "Bearer token-b")
			done <- answer{st, raw}
		}()
		// The owner waits on the turn: the forward waits with it.
		awaitWaitTurn(t, fa, req.method+" "+req.path+" on the owner")
		close(fa.waitRelease)
		select {
		case ans := <-done:
			var res berth.TurnResult
			if ans.st != 200 || json.Unmarshal(ans.raw, &res) != nil || res.Text != "hello" {
				t.Fatalf("%s %s through b: %d %s", req.method, req.path, ans.st, ans.raw)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %s: the forwarded wait did not end with the turn", req.method, req.path)
		}
		fb.mu.Lock()
		here := fb.lastWaitTurn
		fb.mu.Unlock()
		if here != "" {
			t.Fatalf("%s %s: b waited on the turn itself", req.method, req.path)
		}
	}
}

func TestForwardPassesTheOwnersErrorsThrough(t *testing.T) {
	_, a, b, fa, _ := twoNodes(t)
	fa.err = &berth.Error{Code: berth.EConflict, Message: "session ses_1 is busy", Details: map[string]any{"state": "active"}}
	direct, rawA, _ := send(t, a, "POST", "/v1/sessions/ses_1/cancel", "", "Authorization", "Bearer token-a")
	via, rawB, hdrB := send(t, b, "POST", "/v1/sessions/ses_1/cancel", "", "Authorization", "Bearer token-b")
	if direct != 409 || via != 409 {
		t.Fatalf("cancel: direct %d, through b %d", direct, via)
	}
	if !bytes.Equal(rawA, rawB) {
		t.Fatalf("the owner said %s, b passed back %s", rawA, rawB)
	}
	if e := decodeErr(t, rawB); e.Code != berth.EConflict || e.Details["state"] != "active" {
		t.Fatalf("passed back %+v", e)
	}
	if hdrB.Get("Content-Type") != "application/json" || len(hdrB.Values(RequestIDHeader)) != 1 || hdrB.Get("Cache-Control") != "no-store" {
		t.Fatalf("headers through b: %v", hdrB)
	}
	// A fenced write (the owner lost the lease meanwhile) is unavailable,
	// with the reason, wherever it is answered.
	fa.err = berth.Errorf(berth.ELeaseLost, "session ses_1 is now driven by node c")
	st, raw, _ := send(t, b, "POST", "/v1/sessions/ses_1/prompts", `{"text":"x"}`, "Authorization", "Bearer token-b")
	if e := decodeErr(t, raw); st != 503 || e.Code != berth.EUnavailable || e.Details["reason"] != berth.ELeaseLost {
		t.Fatalf("lease lost: %d %s", st, raw)
	}
}

// recorder is an owner that records what it was sent and answers what the
// test set.
type recorder struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, r)
	rc.body = append(rc.body, raw)
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Owner", "yes")
	w.Header().Set("Location", "/v1/sessions/ses_9")
	w.WriteHeader(http.StatusTeapot)
	io.WriteString(w, `{"from":"owner"}`)
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

func TestForwardSendsTheNodeTokenNotTheClients(t *testing.T) {
	c := newFakeCluster()
	rc := &recorder{}
	owner := httptest.NewServer(rc)
	defer owner.Close()
	b := startServer(t, newFakeService(), ServerOptions{Token: "token-b", Cluster: c.clusterOf("b")}, "")
	c.place("o", owner.URL)
	c.set("ses_1", "o")
	body := `{"text":"prompt ü","mode":"queue"}`
	st, raw, hdr := send(t, b, "POST", "/v1/sessions/ses_1/prompts?wait=true&x=%2F", body,
		"Authorization", "Bearer token-b", "Cookie", "berth_session=abc", "Origin", "http://"+b.Addr(),
		"X-Request-ID", "req-fwd-1", "Connection", "X-Secret-Hop", "X-Secret-Hop", "1")
	// The owner's answer, as it is.
	if st != http.StatusTeapot || string(raw) != `{"from":"owner"}` || hdr.Get("X-Owner") != "yes" || hdr.Get("Location") != "/v1/sessions/ses_9" {
		t.Fatalf("answer through b: %d %s %v", st, raw, hdr)
	}
	if rc.count() != 1 {
		t.Fatalf("the owner got %d requests", rc.count())
	}
	r, got := rc.reqs[0], rc.body[0]
	checks := map[string][2]string{
		"Authorization":   {r.Header.Get("Authorization"), "Bearer " + nodeToken},
		ForwardedByHeader: {r.Header.Get(ForwardedByHeader), "b"},
		"Cookie":          {r.Header.Get("Cookie"), ""},
		"Origin":          {r.Header.Get("Origin"), ""},
		"X-Secret-Hop":    {r.Header.Get("X-Secret-Hop"), ""},
		"X-Request-ID":    {r.Header.Get("X-Request-ID"), "req-fwd-1"},
		"Content-Type":    {r.Header.Get("Content-Type"), "application/json"},
		"method":          {r.Method, "POST"},
		"uri":             {r.URL.RequestURI(), "/v1/sessions/ses_1/prompts?wait=true&x=%2F"},
		"body":            {string(got), body},
	}
	for k, v := range checks {
		if v[0] != v[1] {
			t.Errorf("the owner got %s %q, want %q", k, v[0], v[1])
		}
	}
}

func TestForwardToAnUnreachableOwnerIs503NamingIt(t *testing.T) {
	c, _, b, _, fb := twoNodes(t)
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	c.place("c", dead)
	c.set("ses_1", "c")
	st, raw, hdr := send(t, b, "POST", "/v1/sessions/ses_1/stop", "", "Authorization", "Bearer token-b")
	e := decodeErr(t, raw)
	if st != 503 || e.Code != berth.EUnavailable || e.Details["node"] != "c" || !strings.Contains(e.Message, "node c") {
		t.Fatalf("unreachable owner: %d %s", st, raw)
	}
	if hdr.Get(RequestIDHeader) == "" || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("the 503 lacks the API's headers: %v", hdr)
	}
	if n := calls(fb); n != 0 {
		t.Fatalf("b ran the write itself (%d calls)", n)
	}
	// An advertise URL that is no URL is the same: unavailable, named.
	c.place("c", "not a url")
	st, raw, _ = send(t, b, "POST", "/v1/sessions/ses_1/stop", "", "Authorization", "Bearer token-b")
	if e := decodeErr(t, raw); st != 503 || e.Details["node"] != "c" {
		t.Fatalf("bad advertise URL: %d %s", st, raw)
	}
}

func TestForwardedRequestIsNeverForwardedAgain(t *testing.T) {
	c, a, _, fa, _ := twoNodes(t)
	rc := &recorder{}
	other := httptest.NewServer(rc)
	defer other.Close()
	c.place("c", other.URL)
	// b thought a owns ses_1, but c took it over meanwhile.
	c.set("ses_1", "c")
	st, raw, _ := send(t, a, "POST", "/v1/sessions/ses_1/prompts", `{"text":"x"}`,
		"Authorization", "Bearer "+nodeToken, ForwardedByHeader, "b")
	e := decodeErr(t, raw)
	if st != 503 || e.Code != berth.EUnavailable || e.Details["reason"] != "not_owner" || e.Details["node"] != "c" {
		t.Fatalf("forwarded to a node that does not own: %d %s", st, raw)
	}
	if rc.count() != 0 || calls(fa) != 0 {
		t.Fatalf("the request went on (%d) or ran here (%d)", rc.count(), calls(fa))
	}
}

func TestWritesWithoutAnotherOwnerRunWhereTheyArrive(t *testing.T) {
	c, _, b, fa, fb := twoNodes(t)
	for _, owner := range []string{"", "b"} {
		c.set("ses_1", owner)
		before := calls(fb)
		if st, raw, _ := send(t, b, "POST", "/v1/sessions/ses_1/stop", "", "Authorization", "Bearer token-b"); st != 200 {
			t.Fatalf("owner %q: stop on b: %d %s", owner, st, raw)
		}
		if calls(fb) != before+1 {
			t.Fatalf("owner %q: b did not run the stop", owner)
		}
	}
	// Create places the session on the node that receives it.
	c.set("ses_1", "a")
	if st, raw, _ := send(t, b, "POST", "/v1/sessions", `{"agent":"demo"}`, "Authorization", "Bearer token-b"); st != 201 {
		t.Fatalf("create on b: %d %s", st, raw)
	}
	if calls(fa) != 0 {
		t.Fatal("a create went to another node")
	}
	// The owner lookup's failure is answered as it is.
	c.mu.Lock()
	c.err = berth.Errorf(berth.EUnavailable, "the store is down")
	c.mu.Unlock()
	st, raw, _ := send(t, b, "POST", "/v1/sessions/ses_1/stop", "", "Authorization", "Bearer token-b")
	if e := decodeErr(t, raw); st != 503 || e.Message != "the store is down" {
		t.Fatalf("owner lookup failed: %d %s", st, raw)
	}
}

func TestNodeTokenRules(t *testing.T) {
	_, a, _, fa, _ := twoNodes(t)
	prompt := `{"text":"x"}`
	path := "/v1/sessions/ses_1/prompts"
	refused := []struct {
		name   string
		header []string
		status int
	}{
		{"node token without the header", []string{"Authorization", "Bearer " + nodeToken}, 401},
		{"header with a wrong token", []string{"Authorization", "Bearer nope", ForwardedByHeader, "b"}, 401},
		{"header with the user token", []string{"Authorization", "Bearer token-a", ForwardedByHeader, "b"}, 401},
		{"header with no token", []string{ForwardedByHeader, "b"}, 401},
	}
	for _, tt := range refused {
		st, raw, _ := send(t, a, "POST", path, prompt, tt.header...)
		if st != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, st, raw, tt.status)
		}
	}
	if n := calls(fa); n != 0 {
		t.Fatalf("refused requests ran %d calls", n)
	}
	if st, raw, _ := send(t, a, "POST", path, prompt, "Authorization", "Bearer "+nodeToken, ForwardedByHeader, "b"); st != 202 {
		t.Fatalf("a forward with the node token: %d %s", st, raw)
	}
	// The node token opens forwarded session writes, nothing else.
	for _, p := range []string{"GET /v1/sessions", "GET /v1/sessions/ses_1", "POST /v1/login/codes", "POST /v1/sessions"} {
		method, path, _ := strings.Cut(p, " ")
		body := ""
		if method == "POST" {
			body = `{"agent":"demo"}`
		}
		st, raw, _ := send(t, a, method, path, body, "Authorization", "Bearer "+nodeToken, ForwardedByHeader, "b")
		if st != 403 {
			t.Errorf("node token on %s: %d %s, want 403", p, st, raw)
		}
	}
	// A forward reaches the owner at its advertise address, which need not
	// be one of its allowed hosts; nobody else gets past the Host check so.
	h := a.Handler()
	st, body, _ := callTCP(t, h, "POST", path, prompt, "Host", "node-a.internal:7380", "Content-Type", "application/json",
		"Authorization", "Bearer "+nodeToken, ForwardedByHeader, "b")
	if st != 202 {
		t.Fatalf("forward to an advertise host: %d %v", st, body)
	}
	st, body, _ = callTCP(t, h, "POST", path, prompt, "Host", "node-a.internal:7380", "Content-Type", "application/json",
		"Authorization", "Bearer token-a")
	if st != 403 {
		t.Fatalf("a client at an unknown Host: %d %v", st, body)
	}
}

func TestLeaseAndNodeLostAreUnavailable(t *testing.T) {
	for _, code := range []string{berth.ELeaseLost, berth.ENodeLost} {
		f := newFakeService()
		f.err = &berth.Error{Code: code, Message: "lost", Details: map[string]any{"node": "a"}}
		status, body, _ := call(t, NewServer(f, ServerOptions{}).Handler(), "POST", "/v1/sessions/ses_1/stop", "")
		e := body["error"].(map[string]any)
		details := e["details"].(map[string]any)
		if status != 503 || e["code"] != berth.EUnavailable || details["reason"] != code || details["node"] != "a" {
			t.Errorf("%s: %d %v", code, status, body)
		}
	}
}

func TestNoClusterForwardsNothing(t *testing.T) {
	f := newFakeService()
	s := startServer(t, f, ServerOptions{Token: "token-a"}, "")
	// Without a cluster the header means nothing and the node token
	// nothing either.
	st, raw, _ := send(t, s, "POST", "/v1/sessions/ses_1/stop", "", "Authorization", "Bearer token-a", ForwardedByHeader, "x")
	if st != 200 {
		t.Fatalf("stop: %d %s", st, raw)
	}
	st, _, _ = send(t, s, "POST", "/v1/sessions/ses_1/stop", "", "Authorization", "Bearer "+nodeToken, ForwardedByHeader, "x")
	if st != 401 {
		t.Fatalf("a node token without a cluster: %d", st)
	}
}

func TestForwardCutByTheShutdownIsUnavailable(t *testing.T) {
	c := newFakeCluster()
	fa, fb := newFakeService(), newFakeService()
	fa.waitBlocks, fa.waitRelease = true, make(chan struct{})
	defer close(fa.waitRelease)
	a := startServer(t, fa, ServerOptions{Token: "token-a", Cluster: c.clusterOf("a")}, "")
	b, served := serveTCP(t, fb, ServerOptions{Token: "token-b", Cluster: c.clusterOf("b")})
	c.place("a", "http://"+a.Addr())
	c.set("ses_1", "a")
	type answer struct {
		st  int
		raw []byte
	}
	done := make(chan answer, 1)
	go func() {
		st, raw, _ := send(t, b, "POST", "/v1/sessions/ses_1/prompts?wait=true", `{"text":"x"}`, "Authorization", "Bearer token-b")
		done <- answer{st, raw}
	}()
	awaitWaitTurn(t, fa, "the forwarded prompt on the owner")
	if closeErr, serveErr := closeServer(b, served, 10*time.Second); closeErr != nil || serveErr != nil {
		t.Fatalf("Close: %v; Serve: %v", closeErr, serveErr)
	}
	ans := <-done
	if e := decodeErr(t, ans.raw); ans.st != 503 || e.Code != berth.EUnavailable || !strings.Contains(e.Message, "shutting down") {
		t.Fatalf("a forward cut by the shutdown: %d %s", ans.st, ans.raw)
	}
}

// ResumeOn (a lost node's session moving to another node) reaches the
// node asked as a forwarded request does, with the node token: the node
// resumes the session; its error answer comes back with its code and
// details (not_owner, naming the node that drives it, for a retry); a
// node that cannot be reached is said so in details.reason.
func TestResumeOnAsksTheNodeWithTheNodeToken(t *testing.T) {
	c, a, b, _, _ := twoNodes(t)
	ctx := context.Background()
	c.set("ses_1", "")
	if err := b.ResumeOn(ctx, "a", "http://"+a.Addr(), "ses_1"); err != nil {
		t.Fatalf("resume on a: %v", err)
	}
	// a's own answer, through: it has no such session.
	err := b.ResumeOn(ctx, "a", "http://"+a.Addr(), "ses_none")
	if !berth.IsCode(err, berth.ENotFound) || !strings.HasPrefix(berth.ErrorMessage(err), "node a: ") {
		t.Fatalf("resume on a of a session it lacks: %v", err)
	}
	// Driven by b meanwhile: a refuses what was forwarded to it.
	c.set("ses_1", "b")
	err = b.ResumeOn(ctx, "a", "http://"+a.Addr(), "ses_1")
	if !berth.IsCode(err, berth.EUnavailable) || berth.ErrorDetails(err)["node"] != "b" || berth.ErrorDetails(err)["reason"] != "not_owner" {
		t.Fatalf("resume on a of b's session: %v %v", err, berth.ErrorDetails(err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	for _, url := range []string{dead, "not a url"} {
		if err := b.ResumeOn(ctx, "c", url, "ses_1"); berth.ErrorDetails(err)["reason"] != "unreachable" {
			t.Fatalf("resume on %s: %v %v", url, err, berth.ErrorDetails(err))
		}
	}
}
