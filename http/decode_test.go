package http

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzDecodeBodies feeds arbitrary bodies to the routes that decode JSON:
// every answer is a success or a 400/413 with the API's error shape, never
// a 500 or a panic.
func FuzzDecodeBodies(f *testing.F) {
	for _, seed := range []string{
		`{"agent":"demo"}`, `{"text":"hi","mode":"steer"}`, `{"agent":`, `{"agent":"demo"} x`,
		`{"labels":{"a":1}}`, `[]`, `null`, ``, `{"text":"\u003c"}`, `{"agent":"d","ttl_seconds":1e400}`,
	} {
		f.Add(seed)
	}
	h := NewServer(newFakeService(), ServerOptions{MaxPromptBytes: 64}).Handler()
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v1/sessions", "/v1/sessions/ses_1/prompts"} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", path, strings.NewReader(body))
			h.ServeHTTP(rec, req.WithContext(withSocket(req.Context())))
			switch rec.Code {
			case 201, 202:
				continue
			case 400, 413:
			default:
				t.Fatalf("POST %s %q = %d %s", path, body, rec.Code, rec.Body)
			}
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("POST %s %q: error answer %s", path, body, rec.Body)
			}
		}
	})
}
