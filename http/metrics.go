package http

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// handleMetrics answers GET /metrics with ServerOptions.Metrics, behind the
// same authentication and browser guards as the API (auth.go and guard.go
// treat /metrics as the API's); 404 when the server has no metrics.
func (h *daemonInfo) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if h.metrics == nil {
		h.writeError(w, r, berth.Errorf(berth.ENotFound, "this server has no metrics"))
		return
	}
	h.metrics.ServeHTTP(w, r)
}
