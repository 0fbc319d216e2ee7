package http

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/memory"
)

// credentialSecret is a value the answers must never hold.
const credentialSecret = "sk-ant-api03-never-shown-9f8e7d"

// Credentials are set, listed and deleted through the API; no answer
// holds a value; bad names, kinds, values and bodies are 400 naming the
// field without quoting the value, an unknown name 404.
func TestCredentialRoutes(t *testing.T) {
	store := memory.New()
	h := NewServer(newFakeService(), ServerOptions{Credentials: store}).Handler()
	json := `{"value":"` + credentialSecret + `"}`

	status, body, _ := call(t, h, "PUT", "/v1/credentials/anthropic", json, "Content-Type", "application/json")
	if status != 200 || body["name"] != "anthropic" || body["kind"] != berth.CredentialAPIKey || body["last_used_at"] != nil {
		t.Fatalf("put = %d %v", status, body)
	}
	if _, ok := body["value"]; ok {
		t.Fatalf("put answered the value: %v", body)
	}
	status, body, _ = call(t, h, "PUT", "/v1/credentials/claude-sub", `{"value":"sk-ant-oat01-x","kind":"oauth_token"}`,
		"Content-Type", "application/json")
	if status != 200 || body["kind"] != berth.CredentialOAuthToken {
		t.Fatalf("put oauth_token = %d %v", status, body)
	}
	if v, err := store.CredentialValue(context.Background(), "anthropic"); err != nil || string(v) != credentialSecret {
		t.Fatalf("stored %q, %v", v, err)
	}

	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/credentials", nil)
	h.ServeHTTP(rec, req.WithContext(withSocket(req.Context())))
	if rec.Code != 200 || strings.Contains(rec.Body.String(), credentialSecret) || strings.Contains(rec.Body.String(), `"value"`) {
		t.Fatalf("list = %d %s", rec.Code, rec.Body)
	}
	status, body, _ = call(t, h, "GET", "/v1/credentials", "")
	if list, _ := body["credentials"].([]any); status != 200 || len(list) != 2 ||
		list[0].(map[string]any)["name"] != "anthropic" || list[0].(map[string]any)["last_used_at"] == nil {
		t.Fatalf("list = %d %v (anthropic was read: it has a last use)", status, body)
	}

	bad := []struct{ path, body, field string }{
		{"/v1/credentials/Anthropic", json, "name"},
		{"/v1/credentials/" + strings.Repeat("a", 64), json, "name"},
		{"/v1/credentials/ok", `{"value":"` + credentialSecret + `","kind":"password"}`, "kind"},
		{"/v1/credentials/ok", `{"value":"` + credentialSecret + `\n"}`, "value"},
		{"/v1/credentials/ok", `{"value":"` + credentialSecret + `\u0000"}`, "value"},
		{"/v1/credentials/ok", `{"value":""}`, "value"},
		{"/v1/credentials/ok", `{"value":"` + strings.Repeat("k", berth.MaxCredentialBytes+1) + `"}`, "value"},
		{"/v1/credentials/ok", `{"value":"` + credentialSecret + `","secret":true}`, "secret"},
	}
	for _, c := range bad {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("PUT", c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req.WithContext(withSocket(req.Context())))
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"field":"`+c.field+`"`) || strings.Contains(rec.Body.String(), credentialSecret) {
			t.Errorf("PUT %.40s %.60s = %d %s; want 400 naming %s, not the value", c.path, c.body, rec.Code, rec.Body, c.field)
		}
	}
	if list, _ := store.ListCredentials(context.Background()); len(list) != 2 {
		t.Fatalf("refused puts stored something: %+v", list)
	}

	if status, _, _ := call(t, h, "DELETE", "/v1/credentials/anthropic", ""); status != 204 {
		t.Fatalf("delete = %d", status)
	}
	status, body, _ = call(t, h, "DELETE", "/v1/credentials/anthropic", "")
	if status != 404 || errCode(t, body) != berth.ENotFound {
		t.Fatalf("delete again = %d %v", status, body)
	}
	status, body, _ = call(t, h, "DELETE", "/v1/credentials/Bad", "")
	if status != 400 || errCode(t, body) != berth.EInvalid {
		t.Fatalf("delete of a bad name = %d %v", status, body)
	}
}

// A server given no credential store lists none and refuses to set one.
func TestCredentialRoutesWithoutAStore(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	status, body, _ := call(t, h, "GET", "/v1/credentials", "")
	if list, ok := body["credentials"].([]any); status != 200 || !ok || len(list) != 0 {
		t.Fatalf("list = %d %v", status, body)
	}
	status, body, _ = call(t, h, "PUT", "/v1/credentials/x", `{"value":"v"}`, "Content-Type", "application/json")
	if status != 503 || errCode(t, body) != berth.EUnavailable {
		t.Fatalf("put = %d %v", status, body)
	}
}

// The credential routes are the API's: over TCP a token is needed, and a
// browser's cross-site request, or a body that is not JSON, is refused
// before anything is stored or deleted.
func TestCredentialRoutesRefuseBrowsers(t *testing.T) {
	store := memory.New()
	if err := store.PutCredential(context.Background(), "kept", "", []byte("v")); err != nil {
		t.Fatal(err)
	}
	h := NewServer(newFakeService(), ServerOptions{Token: testToken, Credentials: store}).Handler()
	auth := "Bearer " + testToken
	body := `{"value":"` + credentialSecret + `"}`
	for _, c := range []struct {
		name, method, path string
		header             []string
		status             int
	}{
		{"no token", "PUT", "/v1/credentials/new", []string{"Content-Type", "application/json"}, 401},
		{"no token, list", "GET", "/v1/credentials", nil, 401},
		{"foreign Origin", "PUT", "/v1/credentials/new", []string{"Authorization", auth, "Origin", "http://evil.example", "Content-Type", "application/json"}, 403},
		{"cross-site fetch", "PUT", "/v1/credentials/new", []string{"Authorization", auth, "Sec-Fetch-Site", "cross-site", "Content-Type", "application/json"}, 403},
		{"text/plain body", "PUT", "/v1/credentials/new", []string{"Authorization", auth, "Content-Type", "text/plain"}, 415},
		{"cross-site delete", "DELETE", "/v1/credentials/kept", []string{"Authorization", auth, "Sec-Fetch-Site", "cross-site"}, 403},
		{"foreign Host", "DELETE", "/v1/credentials/kept", []string{"Authorization", auth, "Host", "evil.example:7380"}, 403},
	} {
		if status, got, _ := callTCP(t, h, c.method, c.path, body, c.header...); status != c.status {
			t.Errorf("%s = %d %v, want %d", c.name, status, got, c.status)
		}
	}
	if list, _ := store.ListCredentials(context.Background()); len(list) != 1 || list[0].Name != "kept" {
		t.Fatalf("refused requests changed the credentials: %+v", list)
	}
	if status, got, _ := callTCP(t, h, "PUT", "/v1/credentials/new", body, "Authorization", auth, "Content-Type", "application/json"); status != 200 {
		t.Fatalf("with the token = %d %v", status, got)
	}
}

// A value typed where the name goes is not logged: the request log shows
// a credential path with a bad name cut to its prefix.
func TestCredentialPathWithABadNameIsNotLogged(t *testing.T) {
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := NewServer(newFakeService(), ServerOptions{Credentials: memory.New(), Logger: logger}).Handler()
	for _, path := range []string{"/v1/credentials/" + credentialSecret + "X", "/v1/credentials/" + credentialSecret + "/x"} {
		call(t, h, "PUT", path, `{"value":"v"}`, "Content-Type", "application/json")
		call(t, h, "DELETE", path, "")
	}
	call(t, h, "DELETE", "/v1/credentials/anthropic", "")
	if strings.Contains(logs.String(), credentialSecret) || !strings.Contains(logs.String(), "/v1/credentials/anthropic") {
		t.Fatalf("the log:\n%s", logs.String())
	}
}
