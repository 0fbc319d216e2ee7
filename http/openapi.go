package http

import (
	"net/http"
	"strings"

	"github.com/berth-sh/berth/http/apidoc"
)

// openAPIDoc is the OpenAPI 3.1 description of the API (package apidoc).
var openAPIDoc = apidoc.JSON()

// handleOpenAPI serves the OpenAPI document.
func (s *Server) handleOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}

// handle registers a route on the mux and remembers its pattern.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, h)
}

// APIRoutes lists the API's routes as "METHOD /path" patterns: those under
// /v1 and /metrics (the UI's pages are not the API).
func (s *Server) APIRoutes() []string {
	var out []string
	for _, p := range s.patterns {
		_, path, _ := strings.Cut(p, " ")
		if apiPath(path) {
			out = append(out, p)
		}
	}
	return out
}
