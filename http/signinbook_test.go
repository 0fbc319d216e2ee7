package http

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/store/memory"
)

// storedServer returns the handler of a server with token whose sign-ins
// are kept in store, on clock.
func storedServer(store berth.SignInStore, token string, clock *testenv.Clock) http.Handler {
	var log bytes.Buffer
	return newClockedServer(newFakeService(), ServerOptions{Token: token, SessionTTL: time.Hour, SignIns: store}, clock, &log).Handler()
}

// login signs in on h with token and returns the Cookie header of the
// sign-in.
func login(t *testing.T, h http.Handler, token string) []string {
	t.Helper()
	status, body, hdr := callTCP(t, h, "POST", "/v1/login", `{"token":"`+token+`"}`, "Content-Type", "application/json")
	if status != 204 {
		t.Fatalf("login = %d %v", status, body)
	}
	return []string{"Cookie", CookieName + "=" + sessionCookie(t, hdr).Value}
}

// signedIn returns the status of GET /v1/sessions on h with cookie.
func signedIn(t *testing.T, h http.Handler, cookie []string) int {
	t.Helper()
	status, _, _ := callTCP(t, h, "GET", "/v1/sessions", "", cookie...)
	return status
}

// kept reports whether store keeps the sign-in of cookie.
func kept(t *testing.T, store berth.SignInStore, cookie []string) bool {
	t.Helper()
	_, err := store.GetSignIn(testenv.Context(t), keyOf(strings.TrimPrefix(cookie[1], CookieName+"=")))
	if err != nil && !berth.IsCode(err, berth.ENotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// A sign-in kept in the store is accepted by a server that did not make
// it (a restarted daemon, another node); a logout on one ends it on the
// other within signInRecheck; the store keeps the id's hash and the
// token's fingerprint, never either itself.
func TestSignInOutlivesTheServer(t *testing.T) {
	store := memory.New()
	clock := testenv.NewClock(time.Now())
	first := storedServer(store, testToken, clock)
	cookie := login(t, first, testToken)
	id := strings.TrimPrefix(cookie[1], CookieName+"=")
	in, err := store.GetSignIn(testenv.Context(t), sha256.Sum256([]byte(id)))
	if err != nil || in.Token != tokenPrint(testToken) || in.Token == sha256.Sum256([]byte(testToken)) ||
		!in.ExpiresAt.Equal(clock.Now().Add(time.Hour)) {
		t.Fatalf("kept %+v, %v: want the id's hash, the token's fingerprint and the expiry", in, err)
	}

	second := storedServer(store, testToken, clock)
	if got := signedIn(t, second, cookie); got != 200 {
		t.Fatalf("a second server with the same store = %d, want 200", got)
	}
	if status, _, _ := callTCP(t, second, "POST", "/v1/logout", "", cookie...); status != 204 {
		t.Fatalf("logout = %d", status)
	}
	if got := signedIn(t, second, cookie); got != 401 || kept(t, store, cookie) {
		t.Fatalf("after logout = %d (kept %v), want 401 and gone", got, kept(t, store, cookie))
	}
	// The first server trusted it from memory a little while: no longer.
	clock.Advance(signInRecheck)
	if got := signedIn(t, first, cookie); got != 401 {
		t.Fatalf("the first server %v after a logout on the second = %d, want 401", signInRecheck, got)
	}
	if got := signedIn(t, storedServer(store, testToken, clock), cookie); got != 401 {
		t.Fatalf("a third server after the logout = %d, want 401", got)
	}
}

// A new token ends every sign-in made with the old one, and an expired
// sign-in is refused: both are removed from the store.
func TestSignInEndsWithTheTokenAndTheTTL(t *testing.T) {
	store := memory.New()
	clock := testenv.NewClock(time.Now())
	old := login(t, storedServer(store, testToken, clock), testToken)
	if got := signedIn(t, storedServer(store, "another-token-9876543210", clock), old); got != 401 || kept(t, store, old) {
		t.Fatalf("a sign-in of the old token under a new one = %d (kept %v), want 401 and removed", got, kept(t, store, old))
	}

	cookie := login(t, storedServer(store, testToken, clock), testToken)
	clock.Advance(time.Hour)
	if got := signedIn(t, storedServer(store, testToken, clock), cookie); got != 401 || kept(t, store, cookie) {
		t.Fatalf("an expired sign-in = %d (kept %v), want 401 and removed", got, kept(t, store, cookie))
	}
}

// Each new sign-in sweeps expired ones from the store, a bounded number
// at a time: without a timer, they do not pile up.
func TestSignInSweepsExpiredSignIns(t *testing.T) {
	store := memory.New()
	clock := testenv.NewClock(time.Now())
	ctx := testenv.Context(t)
	var ids [][sha256.Size]byte
	for i := range signInSweep + 4 {
		id := sha256.Sum256([]byte{byte(i)})
		ids = append(ids, id)
		if err := store.PutSignIn(ctx, berth.SignIn{ID: id, ExpiresAt: clock.Now().Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	h := storedServer(store, testToken, clock)
	login(t, h, testToken)
	left := 0
	for _, id := range ids {
		if _, err := store.GetSignIn(ctx, id); err == nil {
			left++
		}
	}
	if left != 4 {
		t.Fatalf("%d expired sign-ins left after one sign-in, want 4 (it sweeps %d)", left, signInSweep)
	}
	login(t, h, testToken)
	if n, _ := store.DeleteExpiredSignIns(ctx, clock.Now(), 100); n != 0 {
		t.Fatalf("%d expired sign-ins left after two sign-ins", n)
	}
}

// downStore is a sign-in store that does not answer.
type downStore struct{ berth.SignInStore }

var errDown = errors.New("connection refused to /srv/private/berth.db")

func (downStore) PutSignIn(context.Context, berth.SignIn) error { return errDown }
func (downStore) GetSignIn(context.Context, [sha256.Size]byte) (berth.SignIn, error) {
	return berth.SignIn{}, errDown
}
func (downStore) DeleteSignIn(context.Context, [sha256.Size]byte) error { return errDown }

// A store that does not answer fails closed: no new sign-in, a cookie it
// cannot check is refused with 503 (not let in), a logout says it could
// not end the sign-in; the public pages still load, and no message names
// the store's path.
func TestSignInFailsClosedWithoutTheStore(t *testing.T) {
	store := memory.New()
	clock := testenv.NewClock(time.Now())
	cookie := login(t, storedServer(store, testToken, clock), testToken)
	h := storedServer(downStore{store}, testToken, clock)

	status, body, hdr := callTCP(t, h, "POST", "/v1/login", `{"token":"`+testToken+`"}`, "Content-Type", "application/json")
	if status != 503 || errCode(t, body) != berth.EUnavailable || hdr.Get("Set-Cookie") != "" {
		t.Fatalf("login with the store down = %d %v %v, want 503 and no cookie", status, body, hdr)
	}
	for _, path := range []string{"/v1/sessions", "/v1/health"} {
		status, body, _ := callTCP(t, h, "GET", path, "", cookie...)
		if status != 503 || errCode(t, body) != berth.EUnavailable || strings.Contains(body["error"].(map[string]any)["message"].(string), "/srv") {
			t.Errorf("GET %s with a cookie the store cannot check = %d %v, want 503 without the path", path, status, body)
		}
	}
	page := httptest.NewRequest("GET", "/", nil)
	page.Host = "127.0.0.1:7380"
	page.Header.Set(cookie[0], cookie[1])
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, page)
	if rec.Code != 200 {
		t.Errorf("the UI's page with the store down = %d, want 200", rec.Code)
	}
	if status, _, hdr := callTCP(t, h, "POST", "/v1/logout", "", cookie...); status != 503 || sessionCookie(t, hdr).MaxAge >= 0 {
		t.Errorf("logout with the store down = %d %v, want 503 and the cookie cleared", status, hdr)
	}
	if got := signedIn(t, h, []string{"Authorization", "Bearer " + testToken}); got != 200 {
		t.Errorf("the token with the store down = %d, want 200", got)
	}
}

// deleteCounter counts the sign-ins a store is asked to remove.
type deleteCounter struct {
	berth.SignInStore
	deletes int
}

func (c *deleteCounter) DeleteSignIn(ctx context.Context, id [sha256.Size]byte) error {
	c.deletes++
	return c.SignInStore.DeleteSignIn(ctx, id)
}

// POST /v1/logout is public: a made-up cookie costs the store a read, not
// a write; a real one is removed.
func TestLogoutOfAnUnknownSignInWritesNothing(t *testing.T) {
	store := &deleteCounter{SignInStore: memory.New()}
	h := storedServer(store, testToken, testenv.NewClock(time.Now()))
	made := []string{"Cookie", CookieName + "=" + randomSecret(signInIDBytes)}
	if status, _, _ := callTCP(t, h, "POST", "/v1/logout", "", made...); status != 204 || store.deletes != 0 {
		t.Fatalf("logout of a made-up sign-in = %d with %d deletes, want 204 and none", status, store.deletes)
	}
	cookie := login(t, h, testToken)
	if status, _, _ := callTCP(t, h, "POST", "/v1/logout", "", cookie...); status != 204 || store.deletes != 1 || kept(t, store, cookie) {
		t.Fatalf("logout = %d with %d deletes (kept %v), want 204, one delete, gone", status, store.deletes, kept(t, store, cookie))
	}
}
