package http

import (
	"net/http"

	"github.com/berth-sh/berth/http/apidoc"
)

// openAPIDoc is the OpenAPI 3.1 description of the API (package apidoc).
var openAPIDoc = apidoc.JSON()

// handleOpenAPI serves the OpenAPI document.
func (h *daemonInfo) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
