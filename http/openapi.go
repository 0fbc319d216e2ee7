package http

import (
	"net/http"
	"sync"

	"github.com/berth-sh/berth/http/apidoc"
)

// openAPIDoc is the OpenAPI 3.1 description of the API (package apidoc),
// copied when first served: not a copy held by every berth process from
// its start (shims and agents included).
var openAPIDoc = sync.OnceValue(apidoc.JSON)

// handleOpenAPI serves the OpenAPI document.
func (h *daemonInfo) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc())
}
