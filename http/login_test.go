package http

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// decodeInto unmarshals a JSON answer.
func decodeInto(b []byte, v any) error { return json.Unmarshal(b, v) }

// newClockedServer returns a server whose sign-ins, codes and failure counts
// follow clock, logging at debug level into log.
func newClockedServer(f *fakeService, opts ServerOptions, clock *testenv.Clock, log *bytes.Buffer) *Server {
	opts.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := NewServer(f, opts)
	s.signins.cache.now, s.codes.now, s.failed.now = clock.Now, clock.Now, clock.Now
	return s
}

// sessionCookie returns the berth_session cookie a response set.
func sessionCookie(t *testing.T, hdr http.Header) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: hdr}).Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", CookieName, hdr)
	return nil
}

func TestSignInWithTokenCookieAndLogout(t *testing.T) {
	var log bytes.Buffer
	clock := testenv.NewClock(time.Now())
	s := newClockedServer(newFakeService(), ServerOptions{Token: testToken, SessionTTL: time.Hour}, clock, &log)
	h := s.Handler()
	ctJSON := []string{"Content-Type", "application/json"}

	status, body, _ := callTCP(t, h, "POST", "/v1/login", `{"token":"not-it"}`, ctJSON...)
	if status != 401 || errCode(t, body) != berth.EUnauthenticated {
		t.Fatalf("login with a wrong token = %d %v", status, body)
	}
	status, body, hdr := callTCP(t, h, "POST", "/v1/login", `{"token":"`+testToken+`"}`, ctJSON...)
	if status != 204 {
		t.Fatalf("login = %d %v", status, body)
	}
	c := sessionCookie(t, hdr)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != 3600 || c.Secure ||
		c.Value == "" || strings.Contains(c.Value, testToken) {
		t.Errorf("cookie = %+v", c)
	}
	cookie := []string{"Cookie", CookieName + "=" + c.Value}
	for _, path := range []string{"/v1/sessions", "/v1/health"} {
		if status, body, _ := callTCP(t, h, "GET", path, "", cookie...); status != 200 {
			t.Errorf("GET %s with the cookie = %d %v", path, status, body)
		}
	}
	// A forged or foreign cookie value is not a sign-in.
	if status, _, _ := callTCP(t, h, "GET", "/v1/sessions", "", "Cookie", CookieName+"="+testToken); status != 401 {
		t.Errorf("the token as a cookie = %d, want 401", status)
	}
	// The cookie cannot mint sign-in codes: that needs the token or the socket.
	if status, body, _ := callTCP(t, h, "POST", "/v1/login/codes", "", cookie...); status != 403 {
		t.Errorf("code with a cookie = %d %v, want 403", status, body)
	}
	// Logout ends the sign-in on the server: the same cookie no longer works.
	status, _, hdr = callTCP(t, h, "POST", "/v1/logout", "", cookie...)
	if status != 204 || sessionCookie(t, hdr).MaxAge >= 0 {
		t.Errorf("logout = %d %v", status, hdr)
	}
	if status, _, _ := callTCP(t, h, "GET", "/v1/sessions", "", cookie...); status != 401 {
		t.Errorf("cookie after logout = %d, want 401", status)
	}
	// A sign-in expires with session_ttl.
	_, _, hdr = callTCP(t, h, "POST", "/v1/login", `{"token":"`+testToken+`"}`, ctJSON...)
	cookie = []string{"Cookie", CookieName + "=" + sessionCookie(t, hdr).Value}
	clock.Advance(time.Hour + time.Second)
	if status, _, _ := callTCP(t, h, "GET", "/v1/sessions", "", cookie...); status != 401 {
		t.Errorf("cookie past session_ttl = %d, want 401", status)
	}
	for _, body := range []string{`{}`, `{"token":"a","code":"b"}`} {
		if status, _, _ := callTCP(t, h, "POST", "/v1/login", body, ctJSON...); status != 400 {
			t.Errorf("login %s = %d, want 400", body, status)
		}
	}
	if strings.Contains(log.String(), testToken) {
		t.Errorf("the token is in the log:\n%s", log.String())
	}
}

func TestSignInCodeIsOneTimeAndShortLived(t *testing.T) {
	var log bytes.Buffer
	clock := testenv.NewClock(time.Now())
	s := newClockedServer(newFakeService(), ServerOptions{Token: testToken}, clock, &log)
	if err := s.Listen("127.0.0.1:0", ""); err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	h := s.Handler()
	ctJSON := []string{"Content-Type", "application/json"}
	mint := func(header ...string) LoginCode {
		t.Helper()
		req := httptest.NewRequest("POST", "/v1/login/codes", nil)
		if len(header) == 0 {
			req = req.WithContext(withSocket(req.Context()))
		}
		req.Host = "127.0.0.1:7380"
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var lc LoginCode
		if rec.Code != 201 || decodeInto(rec.Body.Bytes(), &lc) != nil || lc.Code == "" {
			t.Fatalf("mint = %d %s", rec.Code, rec.Body)
		}
		return lc
	}
	lc := mint() // over the socket
	if lc.URL != "http://"+s.Addr()+"/login#code="+lc.Code {
		t.Errorf("url = %q, want the listen address with the code in the fragment", lc.URL)
	}
	if d := lc.ExpiresAt.Sub(clock.Now()); d < CodeTTL-time.Second || d > CodeTTL+time.Second {
		t.Errorf("expires_at is %s away, want %s", d, CodeTTL)
	}
	status, body, hdr := callTCP(t, h, "POST", "/v1/login", `{"code":"`+lc.Code+`"}`, ctJSON...)
	if status != 204 {
		t.Fatalf("login with the code = %d %v", status, body)
	}
	if status, _, _ := callTCP(t, h, "GET", "/v1/sessions", "", "Cookie", CookieName+"="+sessionCookie(t, hdr).Value); status != 200 {
		t.Errorf("cookie from a code = %d", status)
	}
	if status, _, _ := callTCP(t, h, "POST", "/v1/login", `{"code":"`+lc.Code+`"}`, ctJSON...); status != 401 {
		t.Errorf("the code a second time = %d, want 401", status)
	}
	lc = mint("Authorization", "Bearer "+testToken) // with the token over TCP
	clock.Advance(CodeTTL + time.Second)
	if status, _, _ := callTCP(t, h, "POST", "/v1/login", `{"code":"`+lc.Code+`"}`, ctJSON...); status != 401 {
		t.Errorf("a code past two minutes = %d, want 401", status)
	}
	if strings.Contains(log.String(), testToken) {
		t.Errorf("the token is in the log")
	}
}

func TestWrongTokensAreRateLimited(t *testing.T) {
	var log bytes.Buffer
	clock := testenv.NewClock(time.Now())
	s := newClockedServer(newFakeService(), ServerOptions{Token: testToken}, clock, &log)
	h := s.Handler()
	ctJSON := []string{"Content-Type", "application/json"}
	good := []string{"Authorization", "Bearer " + testToken}
	// Four wrong login tokens and one wrong bearer token: five in a minute.
	for i := range 4 {
		if status, _, _ := callTCP(t, h, "POST", "/v1/login", `{"code":"guess`+string(rune('a'+i))+`"}`, ctJSON...); status != 401 {
			t.Fatalf("wrong code %d = %d, want 401", i, status)
		}
		clock.Advance(10 * time.Second)
	}
	status, body, hdr := callTCP(t, h, "GET", "/v1/health", "", "Authorization", "Bearer guess")
	if status != 429 || errCode(t, body) != berth.ERateLimited || hdr.Get("Retry-After") != "60" {
		t.Errorf("fifth wrong token = %d %v Retry-After %q, want 429 rate_limited, 60", status, body, hdr.Get("Retry-After"))
	}
	// Blocked: wrong tokens and codes get 429...
	if status, _, hdr := callTCP(t, h, "GET", "/v1/health", "", "Authorization", "Bearer guess2"); status != 429 || hdr.Get("Retry-After") != "60" {
		t.Errorf("wrong token while blocked = %d Retry-After %q, want 429, 60", status, hdr.Get("Retry-After"))
	}
	if status, _, hdr := callTCP(t, h, "POST", "/v1/login", `{"token":"guess"}`, ctJSON...); status != 429 || hdr.Get("Retry-After") != "60" {
		t.Errorf("wrong login while blocked = %d Retry-After %q, want 429, 60", status, hdr.Get("Retry-After"))
	}
	// ...but the right token still passes (review finding: any local
	// process could lock every loopback client out), and still signs in.
	if status, body, _ := callTCP(t, h, "GET", "/v1/health", "", good...); status != 200 {
		t.Errorf("right token while blocked = %d %v, want 200", status, body)
	}
	if status, _, hdr := callTCP(t, h, "POST", "/v1/login", `{"token":"`+testToken+`"}`, ctJSON...); status != 204 || !strings.Contains(hdr.Get("Set-Cookie"), CookieName) {
		t.Errorf("right login while blocked = %d, want 204 with a cookie", status)
	}
	// Another address is not blocked.
	req := httptest.NewRequest("GET", "/v1/health", nil)
	req.Host, req.RemoteAddr = "127.0.0.1:7380", "192.0.2.99:5555"
	if status, _, _ := serve(t, h, req, good...); status != 200 {
		t.Errorf("another address = %d, want 200", status)
	}
	// A minute later the address may try again.
	clock.Advance(blockFor)
	if status, _, _ := callTCP(t, h, "GET", "/v1/health", "", good...); status != 200 {
		t.Errorf("after the block = %d, want 200", status)
	}
	// Failures spread wider than a minute do not add up.
	for range 8 {
		clock.Advance(15 * time.Second)
		if status, _, _ := callTCP(t, h, "GET", "/v1/health", "", "Authorization", "Bearer guess"); status != 401 {
			t.Fatalf("sparse wrong tokens = %d, want 401", status)
		}
	}
}
