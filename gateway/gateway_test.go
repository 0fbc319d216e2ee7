package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// forT is e for a subtest t.
func (e *env) forT(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// callsOf waits for n calls told of session and returns them.
func (e *env) callsOf(session string, n int) []Call {
	e.t.Helper()
	var out []Call
	waitFor(e.t, fmt.Sprintf("%d calls of %s told", n, session), func() bool {
		out = out[:0]
		for _, c := range e.sess.called() {
			if c.session == session {
				out = append(out, c.call)
			}
		}
		return len(out) >= n
	})
	return out
}

// credOf is the credential the test upstream of kind has.
func credOf(kind Kind) string {
	if kind.openAI() {
		return "openai"
	}
	return string(kind)
}

// wantCost is the cost of u at testPrices.
func wantCost(u usage) float64 {
	return (float64(u.input)*3 + float64(u.output)*15 + float64(u.cacheRead)*0.3 + float64(u.cacheWrite)*3.75) / 1e6
}

// checkUsage fails unless c counts the stand-in's usage of a call of kind.
func checkUsage(t *testing.T, kind Kind, c Call) {
	t.Helper()
	want := wantUsage(kind)
	got := usage{input: c.InputTokens, output: c.OutputTokens, cacheRead: c.CacheReadTokens, cacheWrite: c.CacheWriteTokens}
	if got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
	if math.Abs(c.CostUSD-wantCost(want)) > 1e-12 {
		t.Errorf("cost = %v, want %v", c.CostUSD, wantCost(want))
	}
}

// holds reports whether any value of h, the query or the path holds s.
func holds(c seenCall, s string) bool {
	if strings.Contains(c.query, s) || strings.Contains(c.path, s) || strings.Contains(string(c.body), s) {
		return true
	}
	for _, vs := range c.header {
		for _, v := range vs {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}

// Every kind, streaming and not, reaches its upstream at the upstream's
// URL (its path prefix kept, the query kept), with the real credential in
// the kind's header, the configured headers and the agent's own, and never
// the agent's key; the agent gets the answer and never the real key; the
// call is told with its model, status, timing and the usage the upstream
// reported, priced.
func TestEveryKindForwardedAndCounted(t *testing.T) {
	e := newEnv(t)
	for i, c := range kindCalls() {
		t.Run(c.name, func(t *testing.T) {
			e := e.forT(t)
			session := fmt.Sprintf("ses_%d", i)
			key := e.gw.Register(session)
			before := len(e.up.calls())
			a := e.send(c, key, "X-Agent", "kept")
			if a.status != http.StatusOK || !strings.Contains(a.body, "stub: hello") {
				t.Fatalf("answer %d: %s", a.status, a.body)
			}
			if strings.Contains(a.body, c.realValue) || strings.Contains(fmt.Sprint(a.header), realKeys[credOf(c.kind)]) {
				t.Fatal("the agent got the real key")
			}
			calls := e.up.calls()
			if len(calls) != before+1 {
				t.Fatalf("the upstream got %d calls, want 1", len(calls)-before)
			}
			seen := calls[before]
			if seen.path != c.upPath {
				t.Errorf("upstream path %q, want %q", seen.path, c.upPath)
			}
			if got := seen.header.Get(c.realAs); got != c.realValue {
				t.Errorf("upstream %s = %q, want the real credential", c.realAs, got)
			}
			if seen.header.Get("X-Configured") != "yes-"+string(c.kind) || seen.header.Get("X-Agent") != "kept" {
				t.Errorf("upstream headers: %v", seen.header)
			}
			if holds(seen, key) || holds(seen, keyPrefix) {
				t.Errorf("the upstream saw the session key: %+v", seen)
			}
			if c.kind == KindAnthropic && seen.query != "beta=true" || c.name == "gemini stream=sse" && seen.query != "alt=sse" {
				t.Errorf("upstream query %q", seen.query)
			}
			got := e.callsOf(session, 1)[0]
			if got.Upstream != c.upstream || got.Model != c.model || got.Status != http.StatusOK {
				t.Errorf("call told: %+v", got)
			}
			if got.FirstByte <= 0 || got.FirstByte > got.Duration {
				t.Errorf("first byte %v, duration %v", got.FirstByte, got.Duration)
			}
			checkUsage(t, c.kind, got)
		})
	}
}

// Every way an SDK presents a key (x-api-key, Authorization, api-key,
// x-goog-api-key, ?key=) is removed from the call, with a switch of
// protocol and the agent's Accept-Encoding; the rest of the query stays.
func TestAgentCredentialsStripped(t *testing.T) {
	e := newEnv(t)
	key := e.gw.Register("ses_a")
	a := e.do(http.MethodPost, "/gemini/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key="+key,
		[]string{"X-Api-Key", key, "Authorization", "Bearer " + key, "Api-Key", key, "X-Goog-Api-Key", key,
			"Connection", "Upgrade", "Upgrade", "websocket", "Accept-Encoding", "br"},
		`{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`)
	if a.status != http.StatusOK {
		t.Fatalf("answer %d: %s", a.status, a.body)
	}
	seen := e.up.calls()[0]
	if holds(seen, key) || seen.header.Get("Authorization") != "" || seen.header.Get("X-Api-Key") != "" || seen.header.Get("Api-Key") != "" {
		t.Fatalf("the upstream saw the agent's credentials: %v %q", seen.header, seen.query)
	}
	if seen.query != "alt=sse" || seen.header.Get("X-Goog-Api-Key") != realKeys["gemini"] {
		t.Fatalf("upstream query %q, key %q", seen.query, seen.header.Get("X-Goog-Api-Key"))
	}
	if seen.header.Get("Upgrade") != "" || strings.Contains(seen.header.Get("Accept-Encoding"), "br") {
		t.Fatalf("upstream headers: %v", seen.header)
	}
}

// A subscription token (Claude Code's sk-ant-oat…) goes as a bearer token
// with the OAuth beta added to the agent's betas, never as x-api-key.
func TestAnthropicSubscriptionToken(t *testing.T) {
	e := newEnv(t)
	e.creds.set("anthropic", "sk-ant-oat01-SUBSCRIPTION")
	key := e.gw.Register("ses_a")
	c := kindCalls()[0]
	if a := e.send(c, key, "Anthropic-Beta", "claude-code-20250219"); a.status != http.StatusOK {
		t.Fatalf("answer %d: %s", a.status, a.body)
	}
	h := e.up.calls()[0].header
	if h.Get("Authorization") != "Bearer sk-ant-oat01-SUBSCRIPTION" || h.Get("X-Api-Key") != "" {
		t.Fatalf("upstream auth headers: %v", h)
	}
	if got := h.Get("Anthropic-Beta"); got != "claude-code-20250219,"+oauthBeta {
		t.Fatalf("anthropic-beta %q", got)
	}
}

// errorOf reads an error answer in kind's format (failing on any other
// shape) and returns its type (Gemini: status) and message.
func errorOf(t *testing.T, kind Kind, a answer) (typ, msg string) {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
			Code    any    `json:"code"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(a.body), &v); err != nil || v.Error.Message == "" {
		t.Fatalf("not an error answer: %d %s", a.status, a.body)
	}
	switch {
	case kind.openAI():
		if v.Type != "" || v.Error.Type == "" || v.Error.Status != "" {
			t.Fatalf("not an OpenAI error: %s", a.body)
		}
		typ = v.Error.Type
	case kind == KindGemini:
		if v.Error.Code != float64(a.status) || v.Error.Status == "" || v.Error.Type != "" {
			t.Fatalf("not a Gemini error: %s", a.body)
		}
		typ = v.Error.Status
	default:
		if v.Type != "error" || v.Error.Type == "" || v.Error.Code != nil {
			t.Fatalf("not an Anthropic error: %s", a.body)
		}
		typ = v.Error.Type
	}
	return typ, v.Error.Message
}

// A call without the key of a registered session is a 401 in the
// upstream's format, never forwarded: no key, a made-up one, one ended
// with its session, one replaced, another session's on a session's own
// handler.
func TestUnauthorized(t *testing.T) {
	e := newEnv(t)
	gone := e.gw.Register("ses_gone")
	e.gw.Unregister("ses_gone")
	old := e.gw.Register("ses_b")
	e.gw.Register("ses_b")
	live := e.gw.Register("ses_live")
	fake := keyPrefix + strings.Repeat("A", sessionKeyLn-len(keyPrefix))
	flip := "A"
	if live[len(live)-1] == 'A' {
		flip = "B"
	}
	tampered := live[:len(live)-1] + flip
	only := httptest.NewServer(e.gw.ForSession("ses_other"))
	defer only.Close()
	wantType := map[Kind]string{KindAnthropic: "authentication_error", KindOpenAI: "invalid_request_error", KindOpenAIResponses: "invalid_request_error", KindGemini: "UNAUTHENTICATED"}
	for _, c := range kindCalls() {
		for name, key := range map[string]string{"none": "", "made up": fake, "unregistered": gone, "replaced": old, "tampered": tampered} {
			a := e.send(c, key)
			if a.status != http.StatusUnauthorized || a.header.Get("X-Should-Retry") != "false" {
				t.Fatalf("%s, key %s: %d %s", c.name, name, a.status, a.body)
			}
			if typ, _ := errorOf(t, c.kind, a); typ != wantType[c.kind] {
				t.Fatalf("%s, key %s: type %q", c.name, name, typ)
			}
		}
		other := e.forT(t)
		other.srv = only
		if a := other.send(c, live); a.status != http.StatusUnauthorized {
			t.Fatalf("%s: another session's key on a session's own handler: %d", c.name, a.status)
		}
	}
	if n := len(e.up.calls()); n != 0 {
		t.Fatalf("the upstream got %d calls", n)
	}
	// The live key works, on the shared handler and on its session's own.
	if a := e.send(kindCalls()[0], live); a.status != http.StatusOK {
		t.Fatalf("live key: %d %s", a.status, a.body)
	}
	mine := httptest.NewServer(e.gw.ForSession("ses_live"))
	defer mine.Close()
	own := e.forT(t)
	own.srv = mine
	if a := own.send(kindCalls()[0], live); a.status != http.StatusOK {
		t.Fatalf("live key on its own handler: %d %s", a.status, a.body)
	}
}

// A credential not set is a 401 in the upstream's format that says how to
// set it, and Missing is told; once set, the next call goes through.
func TestMissingCredential(t *testing.T) {
	e := newEnv(t)
	key := e.gw.Register("ses_m")
	for _, c := range []kindCall{kindCalls()[0], kindCalls()[1], kindCalls()[len(kindCalls())-1]} {
		cred := credOf(c.kind)
		e.creds.set(cred, "")
		a := e.send(c, key)
		if a.status != http.StatusUnauthorized {
			t.Fatalf("%s: %d %s", c.name, a.status, a.body)
		}
		want := fmt.Sprintf("the credential %q is not set: berth credentials set %s", cred, cred)
		if _, msg := errorOf(t, c.kind, a); msg != want {
			t.Fatalf("%s: message %q, want %q", c.name, msg, want)
		}
		if m := e.sess.missed(); len(m) == 0 || m[len(m)-1] != "ses_m "+cred {
			t.Fatalf("missing told: %v", m)
		}
		e.creds.set(cred, realKeys[cred])
		if a := e.send(c, key); a.status != http.StatusOK {
			t.Fatalf("%s once set: %d %s", c.name, a.status, a.body)
		}
	}
	if n := len(e.up.calls()); n != 3 {
		t.Fatalf("the upstream got %d calls, want the 3 made once set", n)
	}
}

// No credential's value is ever in an answer, a log line or a call told:
// calls answered, refused by the upstream, failing to reach it, and with
// the store of credentials failing.
func TestCredentialNeverShown(t *testing.T) {
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + down.Addr().String()
	down.Close()
	e := newEnv(t, func(o *Options) {
		o.Upstreams = append(o.Upstreams, Upstream{Name: "down", Kind: KindAnthropic, URL: downURL, Credential: "anthropic"})
	})
	key := e.gw.Register("ses_s")
	var answers []answer
	for _, c := range kindCalls() {
		answers = append(answers, e.send(c, key))
		bad := c
		bad.body = "not json"
		answers = append(answers, e.send(bad, key))
	}
	unreachable := kindCalls()[0]
	unreachable.path = "/down/v1/messages"
	a := e.send(unreachable, key)
	if a.status != http.StatusBadGateway {
		t.Fatalf("unreachable upstream: %d %s", a.status, a.body)
	}
	answers = append(answers, a)
	e.creds.mu.Lock()
	e.creds.err = errors.New("the store is down")
	e.creds.mu.Unlock()
	a = e.send(kindCalls()[1], key)
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("store down: %d %s", a.status, a.body)
	}
	answers = append(answers, a)
	told := e.callsOf("ses_s", 2*len(kindCalls())+1)
	if !strings.Contains(e.logs.String(), "could not be reached") || !strings.Contains(e.logs.String(), "the store is down") {
		t.Fatalf("the failures were not logged:\n%s", e.logs.String())
	}
	for _, v := range realKeys {
		for _, a := range answers {
			if strings.Contains(a.body, v) || strings.Contains(fmt.Sprint(a.header), v) {
				t.Fatalf("an answer holds a credential: %d %v %s", a.status, a.header, a.body)
			}
		}
		if strings.Contains(e.logs.String(), v) {
			t.Fatalf("the log holds a credential:\n%s", e.logs.String())
		}
		if strings.Contains(fmt.Sprintf("%+v", told), v) {
			t.Fatalf("a call told holds a credential: %+v", told)
		}
	}
}

// A call Admit refuses (a spent budget) is a 429 in the upstream's format
// with Admit's message, not to be retried, never forwarded; once admitted
// again, the next call goes through. A failing Admit is a 503.
func TestBudgetRefused(t *testing.T) {
	e := newEnv(t)
	key := e.gw.Register("ses_b")
	wantType := map[Kind]string{KindAnthropic: "rate_limit_error", KindOpenAI: "insufficient_quota", KindOpenAIResponses: "insufficient_quota", KindGemini: "RESOURCE_EXHAUSTED"}
	const spent = "this session's budget of $5.00 is spent"
	for _, c := range kindCalls() {
		e.sess.setRefusal("ses_b", berth.Errorf(berth.EForbidden, spent))
		a := e.send(c, key)
		if a.status != http.StatusTooManyRequests || a.header.Get("X-Should-Retry") != "false" {
			t.Fatalf("%s: %d %v %s", c.name, a.status, a.header, a.body)
		}
		if typ, msg := errorOf(t, c.kind, a); typ != wantType[c.kind] || msg != spent {
			t.Fatalf("%s: %q %q", c.name, typ, msg)
		}
		e.sess.setRefusal("ses_b", berth.Errorf(berth.EUnavailable, "the store is down"))
		if a := e.send(c, key); a.status != http.StatusServiceUnavailable {
			t.Fatalf("%s, Admit failing: %d %s", c.name, a.status, a.body)
		}
	}
	if n := len(e.up.calls()); n != 0 {
		t.Fatalf("the upstream got %d calls", n)
	}
	e.sess.setRefusal("ses_b", nil)
	if a := e.send(kindCalls()[0], key); a.status != http.StatusOK {
		t.Fatalf("admitted again: %d %s", a.status, a.body)
	}
}

// A streamed answer reaches the agent as it comes: its first piece while
// the upstream still holds the rest; then the whole, counted.
func TestStreamPassesThrough(t *testing.T) {
	e := newEnv(t)
	for i, c := range kindCalls() {
		if !c.stream {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			e := e.forT(t)
			session := fmt.Sprintf("ses_%d", i)
			key := e.gw.Register(session)
			hold := make(chan struct{})
			e.up.mu.Lock()
			e.up.hold = hold
			e.up.mu.Unlock()
			defer func() {
				e.up.mu.Lock()
				e.up.hold = nil
				e.up.mu.Unlock()
			}()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			path, hdr := c.path, "Authorization"
			if c.authAs != "key" {
				hdr = c.authAs
			} else {
				path += "?key=" + key
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+path, strings.NewReader(c.body))
			if hdr == "Authorization" {
				req.Header.Set(hdr, "Bearer "+key)
			} else {
				req.Header.Set(hdr, key)
			}
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			first := make([]byte, 64)
			n, err := io.ReadAtLeast(resp.Body, first, 1)
			if err != nil {
				t.Fatalf("no first piece while the upstream holds the rest: %v", err)
			}
			close(hold)
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if all := string(first[:n]) + string(rest); !strings.Contains(all, "stub: hello") {
				t.Fatalf("answer: %s", all)
			}
			got := e.callsOf(session, 1)[0]
			if got.FirstByte <= 0 || got.FirstByte >= got.Duration {
				t.Errorf("first byte %v, duration %v", got.FirstByte, got.Duration)
			}
			checkUsage(t, c.kind, got)
		})
	}
}

// A request's body reaches the upstream as the agent sends it (all but a
// Chat Completions call's, read whole for stream_options).
func TestRequestBodyStreams(t *testing.T) {
	creds := &credStore{vals: realKeys}
	peek := make(chan []byte, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 8)
		_, _ = io.ReadFull(r.Body, b)
		peek <- b
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer up.Close()
	gw, err := New(Options{Upstreams: []Upstream{{Name: "a", Kind: KindAnthropic, URL: up.URL, Credential: "anthropic"},
		{Name: "r", Kind: KindOpenAIResponses, URL: up.URL, Credential: "openai"},
		{Name: "g", Kind: KindGemini, URL: up.URL, Credential: "gemini"}}, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close(t.Context())
	srv := httptest.NewServer(gw)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	key := gw.Register("ses_r")
	for _, path := range []string{"/a/v1/messages", "/r/v1/responses", "/g/v1beta/models/m:generateContent"} {
		pr, pw := io.Pipe()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, pr)
		req.Header.Set("X-Api-Key", key)
		done := make(chan error, 1)
		go func() {
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		if _, err := pw.Write([]byte(`{"model":"m",`)); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-peek:
			if string(b) != `{"model"` {
				t.Fatalf("%s: the upstream got %q", path, b)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the upstream got nothing of a body still being sent", path)
		}
		_, _ = pw.Write([]byte(`"x":1}`))
		pw.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A body over the limit is a 413 in the upstream's format: at once when
// its length says so (never forwarded), and when a body of unknown length
// goes past it.
func TestBodyLimit(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxBody = 2048 })
	key := e.gw.Register("ses_l")
	big := strings.Repeat("x", 4096)
	for _, c := range kindCalls() {
		if c.stream {
			continue
		}
		large := c
		large.body = strings.Replace(c.body, `"hello"`, `"`+big+`"`, 1)
		a := e.send(large, key)
		if a.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: %d %s", c.name, a.status, a.body)
		}
		// Looked for by its body: the cut-off call of the previous case's
		// unknown length may reach the upstream's record only now.
		for _, s := range e.up.calls() {
			if string(s.body) == large.body {
				t.Fatalf("%s: a body too large by its length was forwarded", c.name)
			}
		}
		if _, msg := errorOf(t, c.kind, a); !strings.Contains(msg, "2 KiB") {
			t.Fatalf("%s: %q", c.name, msg)
		}
		// The same, of unknown length.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+strings.Replace(c.path, "?", "?key="+key+"&", 1),
			io.MultiReader(strings.NewReader(large.body)))
		if !strings.Contains(req.URL.RawQuery, "key=") {
			req.URL.RawQuery = "key=" + key
		}
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s, unknown length: %d %s", c.name, resp.StatusCode, b)
		}
		errorOf(t, c.kind, answer{resp.StatusCode, resp.Header, string(b)})
		if a := e.send(c, key); a.status != http.StatusOK {
			t.Fatalf("%s under the limit: %d %s", c.name, a.status, a.body)
		}
	}
	for _, s := range e.up.calls() {
		if len(s.body) > 2048 {
			t.Fatalf("the upstream got a body of %d bytes", len(s.body))
		}
	}
}

// Sessions calling at once are told apart: each call is told of the
// session whose key it carried, with its own model.
func TestConcurrentSessionsIsolated(t *testing.T) {
	e := newEnv(t)
	const sessions, each = 6, 5
	keys := make([]string, sessions)
	for i := range keys {
		keys[i] = e.gw.Register(fmt.Sprintf("ses_%d", i))
	}
	errs := make(chan error, sessions*each)
	var wg sync.WaitGroup
	for i, key := range keys {
		for j := range each {
			wg.Go(func() {
				c := kindCalls()[(i+j)%len(kindCalls())]
				c.body = strings.Replace(c.body, `"model":"`+c.model+`"`, fmt.Sprintf(`"model":"m-%d"`, i), 1)
				if c.kind == KindGemini {
					c.path = strings.Replace(c.path, "gemini-x", fmt.Sprintf("m-%d", i), 1)
				}
				path, hdr := c.path, []string{"X-Goog-Api-Key", key, "Authorization", "Bearer " + key, "X-Api-Key", key}
				resp, err := e.client.Do(mustRequest(t, e.srv.URL+path, c.body, hdr))
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "stub: hello") {
					errs <- fmt.Errorf("session %d: %d %s", i, resp.StatusCode, b)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range keys {
		for _, c := range e.callsOf(fmt.Sprintf("ses_%d", i), each) {
			if c.Model != fmt.Sprintf("m-%d", i) || c.Status != http.StatusOK {
				t.Fatalf("session %d told %+v", i, c)
			}
		}
	}
	if n := len(e.sess.called()); n != sessions*each {
		t.Fatalf("%d calls told, want %d", n, sessions*each)
	}
}

// mustRequest is a POST of body to url with headers.
func mustRequest(t *testing.T, url, body string, headers []string) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Error(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// Only the model APIs are served: any other path of the provider's is a
// 404 in its format, never forwarded; a list of models is forwarded but
// is no model call.
func TestOnlyModelAPIs(t *testing.T) {
	e := newEnv(t)
	key := e.gw.Register("ses_o")
	auth := []string{"X-Api-Key", key}
	for _, c := range []struct {
		method, path string
		kind         Kind
	}{
		{"GET", "/anthropic/v1/files", KindAnthropic},
		{"POST", "/anthropic/v1/messages/batches", KindAnthropic},
		{"POST", "/anthropic/v1/messages/../files", KindAnthropic},
		{"POST", "/anthropic/v1/messages/", KindAnthropic},
		{"GET", "/anthropic/v1/messages", KindAnthropic},
		{"POST", "/openai/v1/files", KindOpenAI},
		{"DELETE", "/openai/v1/responses/resp_1", KindOpenAI},
		{"GET", "/openai-responses/v1/responses/resp_1", KindOpenAIResponses},
		{"POST", "/openai/v1/fine_tuning/jobs", KindOpenAI},
		{"POST", "/gemini/v1beta/tunedModels", KindGemini},
		{"POST", "/gemini/v1beta/models/m:predict", KindGemini},
		{"POST", "/gemini/v1beta/files", KindGemini},
		{"POST", "/nope/v1/messages", KindAnthropic},
	} {
		a := e.do(c.method, c.path, auth, `{}`)
		if a.status != http.StatusNotFound {
			t.Fatalf("%s %s: %d %s", c.method, c.path, a.status, a.body)
		}
		errorOf(t, c.kind, a)
	}
	if n := len(e.up.calls()); n != 0 {
		t.Fatalf("the upstream got %d calls", n)
	}
	e.do("GET", "/openai/v1/models", auth, "")
	if s := e.up.calls(); len(s) != 1 || s[0].path != "/prefix/v1/models" {
		t.Fatalf("upstream calls: %+v", s)
	}
	if n := len(e.sess.called()); n != 0 {
		t.Fatalf("%d calls told of a list of models", n)
	}
}

// A Chat Completions stream gets stream_options.include_usage (the agent's
// other options kept, its false overridden) so that its usage is counted;
// a call that does not stream is forwarded byte for byte.
func TestChatStreamUsageAsked(t *testing.T) {
	e := newEnv(t)
	key := e.gw.Register("ses_c")
	stream := kindCalls()[4]
	if stream.kind != KindOpenAI || !stream.stream {
		t.Fatalf("kindCalls changed: %s", stream.name)
	}
	stream.body = strings.Replace(stream.body, `"stream":true`, `"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":false}`, 1)
	plain := kindCalls()[1]
	for _, c := range []kindCall{stream, plain} {
		if a := e.send(c, key); a.status != http.StatusOK {
			t.Fatalf("%d %s", a.status, a.body)
		}
	}
	seen := e.up.calls()
	var opts struct {
		StreamOptions map[string]bool `json:"stream_options"`
	}
	if err := json.Unmarshal(seen[0].body, &opts); err != nil || !opts.StreamOptions["include_usage"] ||
		opts.StreamOptions["include_obfuscation"] || len(opts.StreamOptions) != 2 {
		t.Fatalf("upstream body %s (%v)", seen[0].body, err)
	}
	if string(seen[1].body) != plain.body {
		t.Fatalf("a call not streaming changed: %s", seen[1].body)
	}
	for _, c := range e.callsOf("ses_c", 2) {
		checkUsage(t, KindOpenAI, c)
	}
}

// An upstream that answers in gzip when asked is still counted: the
// agent's Accept-Encoding is not passed on, the transport's own is, and
// the agent gets the answer plain.
func TestCompressedAnswerCounted(t *testing.T) {
	e := newEnv(t)
	e.up.gzips = true
	key := e.gw.Register("ses_z")
	a := e.send(kindCalls()[0], key, "Accept-Encoding", "gzip")
	if a.status != http.StatusOK || !strings.Contains(a.body, "stub: hello") {
		t.Fatalf("answer %d %v: %q", a.status, a.header, a.body)
	}
	if !strings.Contains(e.up.calls()[0].header.Get("Accept-Encoding"), "gzip") {
		t.Fatal("the upstream was not asked for gzip: this test shows nothing")
	}
	checkUsage(t, KindAnthropic, e.callsOf("ses_z", 1)[0])
}

// Called never holds the agent's answer back, and Close waits for it.
func TestCloseWaitsForCalled(t *testing.T) {
	e := newEnv(t)
	block := make(chan struct{})
	e.sess.block = block
	var unblock sync.Once
	// Before the env's own cleanup, which waits for the calls.
	t.Cleanup(func() { unblock.Do(func() { close(block) }) })
	key := e.gw.Register("ses_w")
	// The whole answer comes while Called is blocked.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c := kindCalls()[3]
	resp, err := e.client.Do(mustRequest(t, e.srv.URL+c.path, c.body, []string{"X-Api-Key", key}).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(b), "event: message_stop") {
		t.Fatalf("answer %v: %s", err, b)
	}
	short, stop := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer stop()
	if err := e.gw.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with Called blocked = %v", err)
	}
	unblock.Do(func() { close(block) })
	if err := e.gw.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sess.called()); n != 1 {
		t.Fatalf("%d calls told", n)
	}
}

// The environment AgentEnv gives points each kind's SDK at its upstream
// on the gateway, with the session's key.
func TestAgentEnv(t *testing.T) {
	e := newEnv(t)
	key := e.gw.Register("ses_e")
	for _, c := range []struct {
		kind           Kind
		base, keyVar   string
		path, auth     string
		body, upstream string
	}{
		{KindAnthropic, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "/v1/messages", "X-Api-Key", kindCalls()[0].body, "anthropic"},
		{KindOpenAI, "OPENAI_BASE_URL", "OPENAI_API_KEY", "/chat/completions", "Authorization", kindCalls()[1].body, "openai"},
		{KindOpenAIResponses, "OPENAI_API_BASE", "OPENAI_API_KEY", "/responses", "Authorization", kindCalls()[2].body, "openai-responses"},
		{KindGemini, "GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY", "/v1beta/models/g:generateContent", "X-Goog-Api-Key", kindCalls()[len(kindCalls())-1].body, "gemini"},
	} {
		env := AgentEnv(c.kind, e.srv.URL+"/"+c.upstream+"/", key)
		if env[c.keyVar] != key || len(env) < 2 {
			t.Fatalf("%s: %v", c.kind, env)
		}
		value := env[c.keyVar]
		if c.auth == "Authorization" {
			value = "Bearer " + value
		}
		resp, err := e.client.Do(mustRequest(t, env[c.base]+c.path, c.body, []string{c.auth, value}))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "stub: hello") {
			t.Fatalf("%s through %s: %d %s", c.kind, env[c.base], resp.StatusCode, b)
		}
	}
	if AgentEnv("nope", "http://x", key) != nil {
		t.Fatal("an unknown kind has an environment")
	}
}
