package http

import (
	"net/http"
	"testing"

	"github.com/berth-sh/berth"
)

// GET /metrics serves the handler it is given, behind the token on TCP
// and without one on the socket; with none it is not found.
func TestMetricsRoute(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// JSON only so that the test helpers decode it.
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"metrics":"served"}`))
	})
	f := newFakeService()
	h := NewServer(f, ServerOptions{Token: testToken, Metrics: metrics}).Handler()
	if status, body, _ := callTCP(t, h, "GET", "/metrics", ""); status != 401 || errCode(t, body) != berth.EUnauthenticated {
		t.Errorf("GET /metrics without the token = %d %v", status, body)
	}
	if status, body, _ := callTCP(t, h, "GET", "/metrics", "", "Authorization", "Bearer "+testToken); status != 200 || body["metrics"] != "served" {
		t.Errorf("GET /metrics with the token = %d %v", status, body)
	}
	if status, body, _ := call(t, h, "GET", "/metrics", ""); status != 200 || body["metrics"] != "served" {
		t.Errorf("GET /metrics on the socket = %d %v", status, body)
	}
	none := NewServer(f, ServerOptions{Token: testToken}).Handler()
	if status, body, _ := call(t, none, "GET", "/metrics", ""); status != 404 || errCode(t, body) != berth.ENotFound {
		t.Errorf("GET /metrics of a server without metrics = %d %v", status, body)
	}
}
