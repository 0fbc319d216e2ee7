package http

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/apitest"

	"github.com/berth-sh/berth"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// call sends one request straight to the handler, as if it came on the Unix
// socket, and decodes the JSON answer (nil for an empty body).
func call(t *testing.T, h http.Handler, method, path, body string, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req = req.WithContext(withSocket(req.Context()))
	return serve(t, h, req, header...)
}

// callTCP is call as if the request came over TCP (the browser guards and
// auth apply), with Host 127.0.0.1:7380 unless a header says otherwise.
func callTCP(t *testing.T, h http.Handler, method, path, body string, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "127.0.0.1:7380"
	return serve(t, h, req, header...)
}

// serve sets the headers (pairs; "Host" sets the Host), runs the request
// and decodes its JSON answer.
func serve(t *testing.T, h http.Handler, req *http.Request, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	method, path := req.Method, req.URL.Path
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	// Every answer of a documented route matches the OpenAPI document.
	apitest.Check(t, req, rec.Code, rec.Header(), rec.Body.Bytes())
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: answer is not a JSON object: %v: %q", method, path, err, rec.Body.String())
		}
	}
	return rec.Code, out, rec.Header()
}

// errCode returns the error code of an error answer.
func errCode(t *testing.T, body map[string]any) string {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	if !ok {
		t.Fatalf("answer has no error object: %v", body)
	}
	if _, ok := e["details"].(map[string]any); !ok {
		t.Fatalf("error has no details object: %v", e)
	}
	return e["code"].(string)
}

// errMessage returns the error message of an error answer.
func errMessage(body map[string]any) string {
	return body["error"].(map[string]any)["message"].(string)
}

func TestRoutes(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 3, berth.EventAgentMessage)
	h := NewServer(f, ServerOptions{Version: "v9"}).Handler()

	tests := []struct {
		method, path, body string
		status             int
		// keys that the JSON answer must have
		keys []string
	}{
		{"GET", "/v1/health", "", 200, []string{"status", "version", "store", "node_id"}},
		{"GET", "/v1/agents", "", 200, []string{"agents"}},
		{"POST", "/v1/sessions", `{"agent":"demo","name":"x","labels":{"a":"b"}}`, 201, []string{"id", "state", "badge", "labels"}},
		{"GET", "/v1/sessions", "", 200, []string{"sessions", "next_cursor"}},
		{"GET", "/v1/sessions/ses_1", "", 200, []string{"id", "state", "acp", "queue"}},
		{"POST", "/v1/sessions/ses_1/prompts", `{"text":"hi"}`, 202, []string{"status", "turn_id"}},
		{"POST", "/v1/sessions/ses_1/prompts?wait=true", `{"text":"hi","mode":"queue"}`, 200, []string{"turn_id", "stop_reason", "text"}},
		{"POST", "/v1/sessions/ses_1/cancel", "", 202, []string{"turn_id"}},
		{"GET", "/v1/sessions/ses_1/events", "", 200, []string{"events", "next_after"}},
		{"GET", "/v1/sessions/ses_1/transcript", "", 200, []string{"turns"}},
		{"POST", "/v1/sessions/ses_1/stop", "", 200, []string{"id", "state", "stop_reason"}},
		{"DELETE", "/v1/sessions/ses_1", "", 204, nil},
	}
	for _, tt := range tests {
		status, body, hdr := call(t, h, tt.method, tt.path, tt.body)
		if status != tt.status {
			t.Errorf("%s %s = %d, want %d: %v", tt.method, tt.path, status, tt.status, body)
			continue
		}
		if tt.status == 204 {
			if body != nil {
				t.Errorf("%s %s: 204 with a body %v", tt.method, tt.path, body)
			}
			continue
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tt.method, tt.path, ct)
		}
		for _, k := range tt.keys {
			if _, ok := body[k]; !ok {
				t.Errorf("%s %s: answer lacks %q: %v", tt.method, tt.path, k, body)
			}
		}
	}
	if _, body, _ := call(t, h, "GET", "/v1/health", ""); body["version"] != "v9" {
		t.Errorf("health version = %v, want the server's v9", body["version"])
	}
	if f.lastCreate.Agent != "demo" || f.lastCreate.Labels["a"] != "b" {
		t.Errorf("create request reached the service as %+v", f.lastCreate)
	}
	if f.lastPrompt.Mode != "queue" || f.lastWaitTurn != "turn_1" {
		t.Errorf("prompt wait: prompt %+v, waited on %q", f.lastPrompt, f.lastWaitTurn)
	}
}

func TestCreateLocation(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	_, body, hdr := call(t, h, "POST", "/v1/sessions", `{"agent":"demo"}`)
	if hdr.Get("Location") != "/v1/sessions/ses_new" || body["id"] != "ses_new" {
		t.Errorf("Location %q, body %v", hdr.Get("Location"), body)
	}
}

func TestEmptyListsAreArrays(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	for _, tt := range []struct{ path, key string }{
		{"/v1/sessions?state=stopped", "sessions"},
		{"/v1/sessions/ses_1/events", "events"},
	} {
		_, body, _ := call(t, h, "GET", tt.path, "")
		if arr, ok := body[tt.key].([]any); !ok || len(arr) != 0 {
			t.Errorf("GET %s: %s = %#v, want []", tt.path, tt.key, body[tt.key])
		}
	}
}

func TestPromptWaitQueuedWaitsOnEntry(t *testing.T) {
	f := newFakeService()
	f.promptResult = berth.PromptResult{Status: "queued", EntryID: "ent_7", Position: 1, Generation: 2}
	h := NewServer(f, ServerOptions{}).Handler()
	status, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/prompts?wait=1", `{"text":"hi"}`)
	if status != 200 || body["stop_reason"] != "end_turn" || f.lastWaitTurn != "ent_7" {
		t.Errorf("= %d %v, waited on %q", status, body, f.lastWaitTurn)
	}
	status, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/prompts", `{"text":"hi"}`)
	if status != 202 || body["status"] != "queued" || body["entry_id"] != "ent_7" || body["position"] != 1.0 {
		t.Errorf("queued prompt = %d %v", status, body)
	}
}

func TestListSessionsFilter(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	status, _, _ := call(t, h, "GET", "/v1/sessions?state=active&agent=demo&parent=ses_0&label=a=1&label=b=x%3Dy&limit=5&cursor=c1", "")
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	got := f.lastSessionF
	if got.State != berth.StateActive || got.Agent != "demo" || got.Parent != "ses_0" || got.Limit != 5 || got.Cursor != "c1" ||
		len(got.Labels) != 2 || got.Labels["a"] != "1" || got.Labels["b"] != "x=y" {
		t.Errorf("filter = %+v", got)
	}
	for _, q := range []string{"state=bogus", "label=novalue", "label==v", "limit=x", "limit=-1"} {
		status, body, _ := call(t, h, "GET", "/v1/sessions?"+q, "")
		if status != 400 || errCode(t, body) != berth.EInvalid {
			t.Errorf("?%s = %d %v, want 400 invalid_argument", q, status, body)
		}
	}
}

func TestListEventsPaging(t *testing.T) {
	f := newFakeService()
	f.appendEvents("ses_1", 5, berth.EventAgentMessage)
	h := NewServer(f, ServerOptions{}).Handler()

	_, body, _ := call(t, h, "GET", "/v1/sessions/ses_1/events?after=1&limit=2&type=agent_message&turn=turn_1", "")
	evs := body["events"].([]any)
	if len(evs) != 2 || evs[0].(map[string]any)["seq"] != 2.0 || body["next_after"] != 3.0 {
		t.Errorf("page = %v", body)
	}
	if f.lastEventF != (berth.EventFilter{After: 1, Limit: 2, Type: "agent_message", TurnID: "turn_1"}) {
		t.Errorf("filter = %+v", f.lastEventF)
	}
	// An empty page keeps the position.
	_, body, _ = call(t, h, "GET", "/v1/sessions/ses_1/events?after=5", "")
	if body["next_after"] != 5.0 || f.lastEventF.Limit != berth.DefaultEventLimit {
		t.Errorf("empty page = %v, limit %d", body, f.lastEventF.Limit)
	}
	// limit over the max is clamped.
	call(t, h, "GET", "/v1/sessions/ses_1/events?limit=5000", "")
	if f.lastEventF.Limit != berth.MaxEventLimit {
		t.Errorf("limit 5000 reached the service as %d", f.lastEventF.Limit)
	}
	for _, q := range []string{"after=x", "after=-1", "limit=1.5", "limit=-2", "after=99999999999999999999"} {
		status, body, _ := call(t, h, "GET", "/v1/sessions/ses_1/events?"+q, "")
		if status != 400 || errCode(t, body) != berth.EInvalid {
			t.Errorf("?%s = %d %v, want 400", q, status, body)
		}
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		code   string
		status int
	}{
		{berth.EInvalid, 400}, {berth.EUnauthenticated, 401}, {berth.EForbidden, 403}, {berth.ENotFound, 404},
		{berth.EConflict, 409}, {berth.ETooLarge, 413}, {berth.EQueueFull, 429}, {berth.EUnavailable, 503},
		{berth.EInternal, 500},
	}
	for _, tt := range tests {
		f := newFakeService()
		f.err = &berth.Error{Code: tt.code, Message: "msg " + tt.code, Details: map[string]any{"k": "v"}, Err: errors.New("/secret/host/path")}
		h := NewServer(f, ServerOptions{}).Handler()
		status, body, _ := call(t, h, "GET", "/v1/sessions/ses_1", "")
		if status != tt.status || errCode(t, body) != tt.code {
			t.Errorf("%s: = %d %v, want %d", tt.code, status, body, tt.status)
			continue
		}
		e := body["error"].(map[string]any)
		details := e["details"].(map[string]any)
		if tt.code == berth.EInternal {
			if e["message"] != "internal error" || len(details) != 0 {
				t.Errorf("internal error leaks: %v", e)
			}
		} else if e["message"] != "msg "+tt.code || details["k"] != "v" {
			t.Errorf("%s: error = %v", tt.code, e)
		}
		if strings.Contains(strings.ToLower(e["message"].(string)), "secret") {
			t.Errorf("%s: message leaks the cause: %v", tt.code, e)
		}
	}
	// An error without a code is internal.
	f := newFakeService()
	f.err = errors.New("disk on fire at /var/lib")
	status, body, _ := call(t, NewServer(f, ServerOptions{}).Handler(), "POST", "/v1/sessions/ses_1/stop", "")
	if status != 500 || errCode(t, body) != berth.EInternal || errMessage(body) != "internal error" {
		t.Errorf("uncoded error = %d %v", status, body)
	}
}

func TestNotFoundAndMethodNotAllowed(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	status, body, _ := call(t, h, "GET", "/v1/nothing", "")
	if status != 404 || errCode(t, body) != berth.ENotFound {
		t.Errorf("unknown route = %d %v", status, body)
	}
	status, body, hdr := call(t, h, "PUT", "/v1/sessions/ses_1", "")
	if status != 405 || errCode(t, body) != berth.EInvalid || !strings.Contains(hdr.Get("Allow"), "GET") {
		t.Errorf("wrong method = %d %v Allow=%q", status, body, hdr.Get("Allow"))
	}
	status, body, _ = call(t, h, "GET", "/v1/sessions/missing", "")
	if status != 404 || errCode(t, body) != berth.ENotFound {
		t.Errorf("missing session = %d %v", status, body)
	}
}

func TestStrictDecoding(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	tests := []struct {
		name, path, body string
		// the message must mention this
		mention string
	}{
		{"unknown field", "/v1/sessions", `{"agent":"demo","unknown_field":true}`, `"unknown_field"`},
		{"field in the wrong case", "/v1/sessions", `{"AGENT":"demo"}`, `"AGENT"`},
		{"malformed", "/v1/sessions", `{"agent":`, "malformed"},
		{"syntax", "/v1/sessions", `{"agent" "demo"}`, "malformed"},
		{"trailing data", "/v1/sessions", `{"agent":"demo"} {"x":1}`, "after the JSON"},
		{"trailing garbage", "/v1/sessions", `{"agent":"demo"}xyz`, "after the JSON"},
		{"wrong type", "/v1/sessions", `{"agent":5}`, `"agent"`},
		{"wrong nested type", "/v1/sessions", `{"agent":"demo","labels":{"a":1}}`, `"labels"`},
		{"not an object", "/v1/sessions", `["demo"]`, "object"},
		{"empty body", "/v1/sessions", ``, "empty"},
		{"missing agent", "/v1/sessions", `{"name":"x"}`, `"agent"`},
		{"prompt unknown field", "/v1/sessions/ses_1/prompts", `{"text":"hi","txt":"x"}`, `"txt"`},
		{"prompt wrong type", "/v1/sessions/ses_1/prompts", `{"text":["hi"]}`, `"text"`},
		{"empty prompt", "/v1/sessions/ses_1/prompts", `{"text":"  "}`, "empty"},
		{"bad mode", "/v1/sessions/ses_1/prompts", `{"text":"hi","mode":"shout"}`, "mode"},
		{"bad wait", "/v1/sessions/ses_1/prompts?wait=maybe", `{"text":"hi"}`, "wait"},
	}
	for _, tt := range tests {
		status, body, _ := call(t, h, "POST", tt.path, tt.body)
		if status != 400 || errCode(t, body) != berth.EInvalid {
			t.Errorf("%s: = %d %v, want 400 invalid_argument", tt.name, status, body)
			continue
		}
		if !strings.Contains(errMessage(body), tt.mention) {
			t.Errorf("%s: message %q does not mention %s", tt.name, errMessage(body), tt.mention)
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{MaxPromptBytes: 100}).Handler()
	// Past the body cap: the reader stops, 413.
	huge := `{"text":"` + strings.Repeat("a", 2<<20) + `"}`
	status, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/prompts", huge)
	if status != 413 || errCode(t, body) != berth.ETooLarge {
		t.Errorf("huge body = %d %v", status, body)
	}
	// Under the body cap but over the prompt cap: 413 with the numbers.
	status, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/prompts", `{"text":"`+strings.Repeat("a", 101)+`"}`)
	if status != 413 || errCode(t, body) != berth.ETooLarge {
		t.Fatalf("large prompt = %d %v", status, body)
	}
	if d := body["error"].(map[string]any)["details"].(map[string]any); d["max_bytes"] != 100.0 || d["bytes"] != 101.0 {
		t.Errorf("details = %v", d)
	}
	// A first prompt in a create request obeys the cap too.
	status, body, _ = call(t, h, "POST", "/v1/sessions", `{"agent":"demo","prompt":"`+strings.Repeat("a", 101)+`"}`)
	if status != 413 || errCode(t, body) != berth.ETooLarge {
		t.Errorf("create with a large prompt = %d %v", status, body)
	}
	// A prompt at the cap whose JSON escaping makes it 6 times larger passes.
	status, body, _ = call(t, h, "POST", "/v1/sessions/ses_1/prompts", `{"text":"`+strings.Repeat(`\u003c`, 100)+`"}`)
	if status != 202 {
		t.Errorf("escaped prompt at the cap = %d %v", status, body)
	}
}

func TestPanicIsInternal(t *testing.T) {
	f := newFakeService()
	f.panicOn = "GetSession"
	status, body, _ := call(t, NewServer(f, ServerOptions{}).Handler(), "GET", "/v1/sessions/ses_1", "")
	if status != 500 || errCode(t, body) != berth.EInternal || errMessage(body) != "internal error" {
		t.Errorf("panic = %d %v", status, body)
	}
}

// Numbers that would overflow a time.Duration, or are out of range, are
// refused at the edge naming the field; the service is not called.
func TestNumbersOutOfRange(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{}).Handler()
	for _, c := range []struct{ body, field string }{
		{`{"agent":"demo","ttl_seconds":9223372036854775807}`, "ttl_seconds"},
		{`{"agent":"demo","idle_timeout_seconds":9223372036854775807}`, "idle_timeout_seconds"},
		{`{"agent":"demo","ttl_seconds":-5}`, "ttl_seconds"},
		{`{"agent":"demo","idle_timeout_seconds":315360001}`, "idle_timeout_seconds"},
		{`{"agent":"demo","ttl_seconds":92233720368547758070}`, "ttl_seconds"},
	} {
		status, body, _ := call(t, h, "POST", "/v1/sessions", c.body)
		if status != 400 || errCode(t, body) != berth.EInvalid {
			t.Errorf("%s = %d %v", c.body, status, body)
			continue
		}
		if d, _ := body["error"].(map[string]any)["details"].(map[string]any); d["field"] != c.field {
			t.Errorf("%s: details %v, want field %s", c.body, d, c.field)
		}
	}
	for _, q := range []string{"limit=99999999999999999999", "limit=-1"} {
		if status, _, _ := call(t, h, "GET", "/v1/sessions?"+q, ""); status != 400 {
			t.Errorf("?%s = %d, want 400", q, status)
		}
	}
	if f.calls != 0 {
		t.Errorf("the service was called %d times", f.calls)
	}
	if status, body, _ := call(t, h, "POST", "/v1/sessions", `{"agent":"demo","ttl_seconds":315360000}`); status != 201 {
		t.Errorf("the largest ttl = %d %v", status, body)
	}
}

// Headers far larger than any client needs are refused with 431 before any
// handler runs, so a client without a token cannot make a connection cost
// net/http's 1 MiB default.
func TestHugeHeadersAreRefused(t *testing.T) {
	s := startServer(t, newFakeService(), ServerOptions{}, "")
	c, err := net.DialTimeout("tcp", s.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := strings.Repeat("a", 100<<10)
	go fmt.Fprintf(c, "GET /ui/style.css HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: %s\r\n\r\n", big)
	// The server closes with the rest unread, so the read may end in a reset.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	if got := string(b); !strings.HasPrefix(got, "HTTP/1.1 431") {
		t.Errorf("a 100 KiB header = %.40q, want 431", got)
	}
}

// Review finding: JSON answers could sit in a browser's disk cache and be
// sniffed. Every API answer (data, errors, the sign-in's 204) says no-store
// and nosniff; the UI's files keep their own no-cache.
func TestAPIAnswersAreNotCachedOrSniffed(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{Token: testToken}).Handler()
	good := []string{"Authorization", "Bearer " + testToken}
	for _, c := range []struct {
		method, path, body string
		header             []string
	}{
		{"GET", "/v1/health", "", good},
		{"GET", "/v1/sessions", "", good},
		{"GET", "/v1/sessions", "", nil},
		{"GET", "/v1/sessions/nope", "", good},
		{"POST", "/v1/login", `{"token":"` + testToken + `"}`, []string{"Content-Type", "application/json"}},
		{"POST", "/v1/logout", "", nil},
	} {
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Host = "127.0.0.1:7380"
		for i := 0; i+1 < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s (%d): Cache-Control %q, want no-store", c.method, c.path, rec.Code, got)
		}
		if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, want nosniff", c.method, c.path, rec.Code, got)
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/ui/style.css", nil)
	req.Host = "127.0.0.1:7380"
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("UI file: %d Cache-Control %q, want 200 no-cache", rec.Code, rec.Header().Get("Cache-Control"))
	}
}
