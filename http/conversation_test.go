package http

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

func TestAuthenticateAndClearRoutes(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{}).Handler()
	for _, bad := range []string{`{}`, `{"method_id":" "}`, `{"method":"x"}`, `{"method_id":"x","extra":1}`} {
		code, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/authenticate", bad)
		if code != http.StatusBadRequest || errCode(t, body) != berth.EInvalid {
			t.Errorf("authenticate %s: %d %v", bad, code, body)
		}
	}
	if code, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/authenticate", `{"method_id":"demo-login"}`); code != http.StatusOK || body["id"] != "ses_1" {
		t.Errorf("authenticate: %d %v", code, body)
	}
	if code, _, _ := call(t, h, "POST", "/v1/sessions/nope/authenticate", `{"method_id":"demo-login"}`); code != http.StatusNotFound {
		t.Errorf("authenticate an unknown session: %d", code)
	}
	if code, body, _ := call(t, h, "POST", "/v1/sessions/ses_1/clear?cancel=maybe", ""); code != http.StatusBadRequest {
		t.Errorf("clear ?cancel=maybe: %d %v", code, body)
	}
	for _, path := range []string{"/v1/sessions/ses_1/clear", "/v1/sessions/ses_1/clear?cancel=true"} {
		if code, body, _ := call(t, h, "POST", path, ""); code != http.StatusOK || body["id"] != "ses_1" {
			t.Errorf("POST %s: %d %v", path, code, body)
		}
	}
}

func TestPromptContentIsCheckedAtTheEdge(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{MaxPromptBytes: 64}).Handler()
	cases := map[string]int{
		`{"text":"a","content":[{"type":"text","text":"b"}]}`: http.StatusBadRequest,
		`{"content":[]}`: http.StatusBadRequest,
		`{"content":[{"type":"video","data":"AA=="}]}`:                                 http.StatusBadRequest,
		`{"content":[{"type":"image","mime_type":"text/plain","data":"AA=="}]}`:        http.StatusBadRequest,
		`{"content":[{"type":"image","mime_type":"image/png","data":"not base64!"}]}`:  http.StatusBadRequest,
		`{"content":[{"type":"resource","uri":"x","text":"a","blob":"AA=="}]}`:         http.StatusBadRequest,
		`{"content":[{"type":"file","path":"a","text":"smuggled"}]}`:                   http.StatusBadRequest,
		`{"content":[{"type":"text","text":"` + strings.Repeat("x", 65) + `"}]}`:       http.StatusRequestEntityTooLarge,
		`{"content":[{"type":"resource_link","uri":"https://example.com/a"}]}`:         http.StatusAccepted,
		`{"content":[{"type":"image","mime_type":"image/png","data":"iVBORw=="}]}`:     http.StatusAccepted,
		`{"content":[{"type":"text","text":"hi"},{"type":"file","path":"notes.txt"}]}`: http.StatusAccepted,
	}
	for body, want := range cases {
		if code, got, _ := call(t, h, "POST", "/v1/sessions/ses_1/prompts", body); code != want {
			t.Errorf("%s: %d %v, want %d", body, code, got, want)
		}
	}
}
