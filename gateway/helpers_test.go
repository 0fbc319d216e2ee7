package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/modelstub"
	"github.com/berth-sh/berth/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The real credentials of the test upstreams.
var realKeys = map[string]string{
	"anthropic": "sk-ant-api03-REAL-anthropic-key",
	"openai":    "sk-proj-REAL-openai-key",
	"gemini":    "AIza-REAL-gemini-key",
}

// testPrices price every test upstream's tokens.
var testPrices = Prices{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}

// credStore is a Credentials of a map.
type credStore struct {
	mu   sync.Mutex
	vals map[string]string
	err  error // when set, every read fails with it
}

// Credential implements Credentials.
func (c *credStore) Credential(_ context.Context, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return "", c.err
	}
	v, ok := c.vals[name]
	if !ok {
		return "", berth.Errorf(berth.ENotFound, "no credential %q", name)
	}
	return v, nil
}

// set sets (value != "") or removes a credential.
func (c *credStore) set(name, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if value == "" {
		delete(c.vals, name)
		return
	}
	c.vals[name] = value
}

// sessionCall is one Called.
type sessionCall struct {
	session string
	call    Call
}

// sessionsRec is a Sessions that records what it is told and refuses the
// sessions it is told to.
type sessionsRec struct {
	mu      sync.Mutex
	refuse  map[string]error
	calls   []sessionCall
	missing []string // "session credential"
	block   chan struct{}
}

// Admit implements Sessions.
func (s *sessionsRec) Admit(_ context.Context, sessionID, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refuse[sessionID]
}

// Called implements Sessions.
func (s *sessionsRec) Called(sessionID string, c Call) {
	s.mu.Lock()
	block := s.block
	s.mu.Unlock()
	if block != nil {
		<-block
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, sessionCall{sessionID, c})
}

// Missing implements Sessions.
func (s *sessionsRec) Missing(sessionID, credential string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missing = append(s.missing, sessionID+" "+credential)
}

// setRefusal makes Admit refuse sessionID with err (nil: admit).
func (s *sessionsRec) setRefusal(sessionID string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse == nil {
		s.refuse = map[string]error{}
	}
	s.refuse[sessionID] = err
}

// called returns the calls told so far.
func (s *sessionsRec) called() []sessionCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sessionCall(nil), s.calls...)
}

// missed returns the Missing told so far.
func (s *sessionsRec) missed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.missing...)
}

// seenCall is a call the upstream got.
type seenCall struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// upstreamRec is the test upstream: the model stand-in under /prefix, which
// records the calls it gets. With hold set, a streamed answer stops after
// its first piece until hold is closed.
type upstreamRec struct {
	mu    sync.Mutex
	seen  []seenCall
	stub  http.Handler
	hold  chan struct{}
	gzips bool // answers in gzip whoever asks for it
}

// newUpstreamRec returns an upstream serving modelstub under /prefix.
func newUpstreamRec() *upstreamRec {
	return &upstreamRec{stub: http.StripPrefix("/prefix", &modelstub.Server{})}
}

// ServeHTTP implements http.Handler.
func (u *upstreamRec) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen = append(u.seen, seenCall{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
	hold, gzips := u.hold, u.gzips
	u.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if hold != nil {
		w = &holdWriter{ResponseWriter: w, hold: hold, done: r.Context().Done()}
	}
	if gzips && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w = newGzipWriter(w)
		defer w.(*gzipWriter).Close()
	}
	u.stub.ServeHTTP(w, r)
}

// calls returns the calls the upstream got.
func (u *upstreamRec) calls() []seenCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenCall(nil), u.seen...)
}

// holdWriter stops an answer after its first flushed piece of body until
// hold is closed (or the call ends).
type holdWriter struct {
	http.ResponseWriter
	hold       chan struct{}
	done       <-chan struct{}
	wrote, led bool
}

func (h *holdWriter) Write(p []byte) (int, error) {
	h.wrote = true
	return h.ResponseWriter.Write(p)
}

func (h *holdWriter) Flush() {
	h.ResponseWriter.(http.Flusher).Flush()
	if h.wrote && !h.led {
		h.led = true
		select {
		case <-h.hold:
		case <-h.done:
		}
	}
}

// env is a gateway in front of the test upstream, with a client.
type env struct {
	t      *testing.T
	up     *upstreamRec
	upURL  string
	creds  *credStore
	sess   *sessionsRec
	logs   *testenv.Buffer
	gw     *Gateway
	srv    *httptest.Server
	client *http.Client
}

// testUpstreams are the configured upstreams of env: one of each kind at
// url, with a path prefix, prices and a header of its own.
func testUpstreams(url string) []Upstream {
	var out []Upstream
	for _, k := range Kinds {
		out = append(out, Upstream{Name: string(k), Kind: k, URL: url + "/prefix", Credential: credOf(k), Prices: testPrices,
			Headers: map[string]string{"X-Configured": "yes-" + string(k)}})
	}
	return out
}

// newEnv starts an env; edit changes its options.
func newEnv(t *testing.T, edit ...func(*Options)) *env {
	t.Helper()
	e := &env{t: t, up: newUpstreamRec(), creds: &credStore{vals: map[string]string{}}, sess: &sessionsRec{}, logs: &testenv.Buffer{}}
	for k, v := range realKeys {
		e.creds.vals[k] = v
	}
	upSrv := httptest.NewServer(e.up)
	t.Cleanup(upSrv.Close)
	e.upURL = upSrv.URL
	table, err := Resolve(testUpstreams(upSrv.URL))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Upstreams: table, Credentials: e.creds, Sessions: e.sess,
		Logger: slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, f := range edit {
		f(&opts)
	}
	e.gw, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.gw)
	tr := &http.Transport{DisableCompression: true}
	e.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		e.srv.Close()
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.gw.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// answer is what the agent got.
type answer struct {
	status int
	header http.Header
	body   string
}

// do calls the gateway: method, path (with query), headers as name, value
// pairs, body ("" for none).
func (e *env) do(method, path string, headers []string, body string) answer {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// waitFor polls cond until it holds or 30 s pass (a loaded machine under
// -race is slow).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, what, cond)
}

// gzipWriter answers in gzip.
type gzipWriter struct {
	http.ResponseWriter
	gz          *gzip.Writer
	wroteHeader bool
}

func newGzipWriter(w http.ResponseWriter) *gzipWriter {
	return &gzipWriter{ResponseWriter: w, gz: gzip.NewWriter(w)}
}

func (g *gzipWriter) WriteHeader(code int) {
	g.wroteHeader = true
	g.Header().Set("Content-Encoding", "gzip")
	g.Header().Del("Content-Length")
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	return g.gz.Write(p)
}

func (g *gzipWriter) Flush() {
	_ = g.gz.Flush()
	g.ResponseWriter.(http.Flusher).Flush()
}

func (g *gzipWriter) Close() { _ = g.gz.Close() }

// kindCall is a model call of one kind, as its SDK makes it.
type kindCall struct {
	name      string // the case's name
	upstream  string
	kind      Kind
	path      string // on the gateway, query included
	upPath    string // what the upstream gets, its /prefix included
	body      string
	model     string
	stream    bool
	authAs    string // the header the key goes in ("key" for ?key=)
	realAs    string // the header the upstream gets the real key in
	realValue string // and its value
}

// kindCalls are a call of every kind, streaming and not.
func kindCalls() []kindCall {
	var out []kindCall
	for _, stream := range []bool{false, true} {
		s := fmt.Sprint(stream)
		out = append(out,
			kindCall{name: "anthropic stream=" + s, upstream: "anthropic", kind: KindAnthropic, path: "/anthropic/v1/messages?beta=true",
				upPath: "/prefix/v1/messages", model: "claude-x", stream: stream,
				body:   `{"model":"claude-x","stream":` + s + `,"max_tokens":9,"messages":[{"role":"user","content":"hello"}]}`,
				authAs: "X-Api-Key", realAs: "X-Api-Key", realValue: realKeys["anthropic"]},
			kindCall{name: "openai stream=" + s, upstream: "openai", kind: KindOpenAI, path: "/openai/v1/chat/completions",
				upPath: "/prefix/v1/chat/completions", model: "gpt-x", stream: stream,
				body:   `{"model":"gpt-x","stream":` + s + `,"messages":[{"role":"user","content":"hello"}]}`,
				authAs: "Authorization", realAs: "Authorization", realValue: "Bearer " + realKeys["openai"]},
			kindCall{name: "openai-responses stream=" + s, upstream: "openai-responses", kind: KindOpenAIResponses,
				path: "/openai-responses/v1/responses", upPath: "/prefix/v1/responses", model: "codex-x", stream: stream,
				body:   `{"model":"codex-x","stream":` + s + `,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}]}`,
				authAs: "Authorization", realAs: "Authorization", realValue: "Bearer " + realKeys["openai"]},
		)
	}
	for _, c := range []struct{ name, verb, query, authAs string }{
		{"gemini stream=false", "generateContent", "", "X-Goog-Api-Key"},
		{"gemini stream=sse", "streamGenerateContent", "?alt=sse", "X-Goog-Api-Key"},
		{"gemini stream=array", "streamGenerateContent", "", "key"},
	} {
		out = append(out, kindCall{name: c.name, upstream: "gemini", kind: KindGemini,
			path:   "/gemini/v1beta/models/gemini-x:" + c.verb + c.query,
			upPath: "/prefix/v1beta/models/gemini-x:" + c.verb, model: "gemini-x", stream: c.verb != "generateContent",
			body:   `{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`,
			authAs: c.authAs, realAs: "X-Goog-Api-Key", realValue: realKeys["gemini"]})
	}
	return out
}

// send makes c with key (presented as c.authAs) and extra headers.
func (e *env) send(c kindCall, key string, extra ...string) answer {
	e.t.Helper()
	path, headers := c.path, extra
	switch c.authAs {
	case "key":
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "key=" + key
	case "Authorization":
		headers = append(headers, "Authorization", "Bearer "+key)
	default:
		headers = append(headers, c.authAs, key)
	}
	return e.do(http.MethodPost, path, append(headers, "Content-Type", "application/json"), c.body)
}

// wantUsage is the usage the gateway must read of the stand-in's answers
// to a call of kind: modelstub's counts, in Call's terms.
func wantUsage(kind Kind) usage {
	u := usage{input: modelstub.InputTokens, output: modelstub.OutputTokens, cacheRead: modelstub.CacheReadTokens}
	if kind == KindAnthropic {
		u.cacheWrite = modelstub.CacheWriteTokens
	}
	return u
}
