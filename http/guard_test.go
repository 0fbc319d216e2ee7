package http

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// attackBody is what the page in the found attack sent.
const attackBody = `{"agent":"demo","prompt":"run id"}`

func TestTCPNeedsToken(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{Token: testToken}).Handler()
	for _, auth := range []string{"", "Bearer wrong", "Basic " + testToken, testToken} {
		status, body, hdr := callTCP(t, h, "GET", "/v1/health", "", "Authorization", auth)
		if status != 401 || errCode(t, body) != berth.EUnauthenticated || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q = %d %v", auth, status, body)
		}
	}
	for _, auth := range []string{"Bearer " + testToken, "bearer " + testToken} {
		if status, body, _ := callTCP(t, h, "GET", "/v1/health", "", "Authorization", auth); status != 200 {
			t.Errorf("Authorization %q = %d %v", auth, status, body)
		}
	}
	// API routes, known or not, and /metrics are behind the token; so is
	// anything but GET or HEAD; pages are not (they carry no data).
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/nothing", 401}, {"GET", "/v1/sessions", 401}, {"GET", "/metrics", 401},
		{"POST", "/v1/sessions", 401}, {"POST", "/v1/login/codes", 401}, {"DELETE", "/v1/sessions/ses_1", 401},
		{"POST", "/", 401}, {"GET", "/ui/app.js", 404}, {"GET", "/nothing", 404},
	} {
		if status, body, _ := callTCP(t, h, c.method, c.path, ""); status != c.want {
			t.Errorf("%s %s without a token = %d %v, want %d", c.method, c.path, status, body, c.want)
		}
	}
	if f.calls != 0 {
		t.Errorf("the service was called %d times for refused requests", f.calls)
	}
	// The socket's 0600 mode is its check.
	if status, body, _ := call(t, h, "GET", "/v1/sessions", ""); status != 200 {
		t.Errorf("socket without a token = %d %v", status, body)
	}
}

func TestBrowserGuards(t *testing.T) {
	f := newFakeService()
	h := NewServer(f, ServerOptions{Token: testToken, AllowedHosts: []string{"berth.internal"},
		AllowedOrigins: []string{"https://ui.example"}}).Handler()
	auth := "Bearer " + testToken
	refused := []struct {
		name   string
		method string
		header []string
		status int
		code   string
	}{
		{"foreign Host (DNS rebinding)", "POST", []string{"Host", "evil.example:7380", "Content-Type", "application/json"}, 403, berth.EForbidden},
		{"empty Host", "POST", []string{"Host", "", "Content-Type", "application/json"}, 403, berth.EForbidden},
		{"foreign Origin", "POST", []string{"Origin", "http://evil.example", "Content-Type", "application/json"}, 403, berth.EForbidden},
		{"Origin null", "POST", []string{"Origin", "null", "Content-Type", "application/json"}, 403, berth.EForbidden},
		{"another loopback origin", "POST", []string{"Origin", "http://localhost:7380", "Content-Type", "application/json"}, 403, berth.EForbidden},
		{"other port", "POST", []string{"Origin", "http://127.0.0.1:8080", "Content-Type", "application/json"}, 403, berth.EForbidden},
		{"cross-site fetch without Origin", "POST", []string{"Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, 403, berth.EForbidden},
		{"text/plain body", "POST", []string{"Content-Type", "text/plain;charset=UTF-8"}, 415, berth.EUnsupportedMedia},
		{"form body", "POST", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, berth.EUnsupportedMedia},
		{"no Content-Type", "POST", nil, 415, berth.EUnsupportedMedia},
		{"multipart body", "PUT", []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, berth.EUnsupportedMedia},
	}
	for _, c := range refused {
		header := append([]string{"Authorization", auth}, c.header...)
		status, body, hdr := callTCP(t, h, c.method, "/v1/sessions", attackBody, header...)
		if status != c.status || errCode(t, body) != c.code {
			t.Errorf("%s = %d %v, want %d %s", c.name, status, body, c.status, c.code)
		}
		if hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: CORS header %q on a refusal", c.name, hdr.Get("Access-Control-Allow-Origin"))
		}
	}
	if f.calls != 0 || len(f.sessions) != 1 {
		t.Fatalf("refused requests reached the service: %d calls, %d sessions", f.calls, len(f.sessions))
	}

	accepted := []struct {
		name   string
		header []string
	}{
		{"same origin", []string{"Origin", "http://127.0.0.1:7380"}},
		{"localhost any port", []string{"Host", "localhost:9999"}},
		{"[::1]", []string{"Host", "[::1]:7380", "Origin", "http://[::1]:7380"}},
		{"allowed host", []string{"Host", "BERTH.internal:80"}},
		{"same-origin fetch", []string{"Sec-Fetch-Site", "same-origin"}},
		{"JSON with a charset", []string{"Content-Type", "application/json; charset=utf-8"}},
	}
	for _, c := range accepted {
		header := append([]string{"Authorization", auth, "Content-Type", "application/json"}, c.header...)
		status, body, hdr := callTCP(t, h, "POST", "/v1/sessions", `{"agent":"demo"}`, header...)
		if status != 201 {
			t.Errorf("%s = %d %v, want 201", c.name, status, body)
		}
		if hdr.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: CORS header without an allowed cross origin", c.name)
		}
	}

	// An allowed cross origin gets CORS headers and its preflight answered.
	status, _, hdr := callTCP(t, h, "OPTIONS", "/v1/sessions", "", "Origin", "https://ui.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
	if status != 204 || hdr.Get("Access-Control-Allow-Origin") != "https://ui.example" ||
		hdr.Get("Access-Control-Allow-Methods") == "" || hdr.Get("Access-Control-Allow-Headers") == "" {
		t.Errorf("preflight of an allowed origin = %d %v", status, hdr)
	}
	status, body, hdr := callTCP(t, h, "GET", "/v1/sessions", "", "Origin", "https://ui.example", "Authorization", auth)
	if status != 200 || hdr.Get("Access-Control-Allow-Origin") != "https://ui.example" {
		t.Errorf("GET from an allowed origin = %d %v %v", status, body, hdr)
	}
	status, _, hdr = callTCP(t, h, "OPTIONS", "/v1/sessions", "", "Origin", "https://evil.example",
		"Access-Control-Request-Method", "POST")
	if status != 403 || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of a foreign origin = %d %v", status, hdr)
	}

	// A link followed from another site may open a page (no data), never
	// reach the API.
	page := httptest.NewRequest("GET", "/", nil)
	page.Host = "127.0.0.1:7380"
	page.Header.Set("Sec-Fetch-Site", "cross-site")
	page.Header.Set("Sec-Fetch-Mode", "navigate")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, page)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Errorf("cross-site navigation to a page = %d %q, want the UI's page", rec.Code, rec.Header().Get("Content-Type"))
	}
	for _, path := range []string{"/v1/sessions", "/metrics"} {
		if status, _, _ := callTCP(t, h, "GET", path, "", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate",
			"Authorization", auth); status != 403 {
			t.Errorf("cross-site navigation to %s = %d, want 403", path, status)
		}
	}

	// The socket is not a browser's: none of this applies there.
	if status, body, _ := call(t, h, "POST", "/v1/sessions", `{"agent":"demo"}`, "Host", "evil.example",
		"Origin", "http://evil.example", "Content-Type", "text/plain"); status != 201 {
		t.Errorf("socket with foreign headers = %d %v", status, body)
	}
}

// TestFoundAttackIsRefused replays a cross-site attack: a no-cors fetch
// from a page of another origin, with and without the token-less loopback
// option, and its DNS-rebinding variant.
func TestFoundAttackIsRefused(t *testing.T) {
	for _, opts := range []ServerOptions{{Token: testToken}, {LoopbackWithoutToken: true}} {
		f := newFakeService()
		h := NewServer(f, opts).Handler()
		for _, header := range [][]string{
			{"Origin", "http://evil.example", "Content-Type", "text/plain;charset=UTF-8", "Sec-Fetch-Site", "cross-site"},
			{"Host", "rebound.evil.example:7380", "Origin", "http://rebound.evil.example:7380", "Content-Type", "text/plain;charset=UTF-8"},
		} {
			status, body, _ := callTCP(t, h, "POST", "/v1/sessions", attackBody, header...)
			if status != 403 {
				t.Errorf("token %t: attack %v = %d %v, want 403", opts.Token != "", header, status, body)
			}
		}
		// Even same-origin, a body that is not JSON never reaches the service.
		status, _, _ := callTCP(t, h, "POST", "/v1/sessions", attackBody, "Content-Type", "text/plain", "Authorization", "Bearer "+testToken)
		if status != 415 {
			t.Errorf("token %t: text/plain body = %d, want 415", opts.Token != "", status)
		}
		if f.calls != 0 || len(f.sessions) != 1 {
			t.Errorf("token %t: the attack reached the service: %d calls, %d sessions", opts.Token != "", f.calls, len(f.sessions))
		}
	}
}
