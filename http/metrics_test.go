package http

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/berth-sh/berth"
)

// GET /metrics serves the handler it is given, behind the token on TCP
// and without one on the socket; with none it is not found.
func TestMetricsRoute(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte("berth_served 1\n"))
	})
	// get answers GET /metrics as text, on the socket or over TCP.
	get := func(h http.Handler, tcp bool, header ...string) (int, string) {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if tcp {
			req.Host = "127.0.0.1:7380"
		} else {
			req = req.WithContext(withSocket(req.Context()))
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	f := newFakeService()
	h := NewServer(f, ServerOptions{Token: testToken, Metrics: metrics}).Handler()
	if status, body, _ := callTCP(t, h, "GET", "/metrics", ""); status != 401 || errCode(t, body) != berth.EUnauthenticated {
		t.Errorf("GET /metrics without the token = %d %v", status, body)
	}
	if status, body := get(h, true, "Authorization", "Bearer "+testToken); status != 200 || body != "berth_served 1\n" {
		t.Errorf("GET /metrics with the token = %d %q", status, body)
	}
	if status, body := get(h, false); status != 200 || body != "berth_served 1\n" {
		t.Errorf("GET /metrics on the socket = %d %q", status, body)
	}
	none := NewServer(f, ServerOptions{Token: testToken}).Handler()
	if status, body, _ := call(t, none, "GET", "/metrics", ""); status != 404 || errCode(t, body) != berth.ENotFound {
		t.Errorf("GET /metrics of a server without metrics = %d %v", status, body)
	}
}
