package http

import (
	"io/fs"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/web"
)

// uiPrefix is where the web UI's static files are served.
const uiPrefix = "/ui/"

// contentSecurityPolicy is sent with every UI page and file: scripts and
// styles only from the daemon's own files (no inline script, no eval), the
// API only on the same origin, and no framing (clickjacking).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// uiRoutes registers the web UI (CONTRACT §8): one HTML shell for every
// screen's address (the modules read the path) and the files under
// uiPrefix. They carry no data, so they need no auth: every API call the
// page makes does.
func (s *Server) uiRoutes() {
	s.mux.HandleFunc("GET /{$}", s.handleUIPage)
	s.mux.HandleFunc("GET /login", s.handleUIPage)
	s.mux.HandleFunc("GET /sessions/{id}", s.handleUIPage)
	files := http.FileServerFS(web.FS)
	s.mux.Handle("GET "+uiPrefix, http.StripPrefix(strings.TrimSuffix(uiPrefix, "/"), http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			// Only files are served (no directory listings); anything else
			// is the API's JSON 404.
			name := strings.TrimPrefix(r.URL.Path, "/")
			if info, err := fs.Stat(web.FS, name); err != nil || info.IsDir() || name == "" {
				s.writeError(w, r, berth.Errorf(berth.ENotFound, "no UI file %s", r.URL.Path))
				return
			}
			setUIHeaders(w)
			files.ServeHTTP(w, r)
		})))
}

// handleUIPage serves the UI's HTML shell.
func (s *Server) handleUIPage(w http.ResponseWriter, r *http.Request) {
	page, err := fs.ReadFile(web.FS, "index.html")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	setUIHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}

// setUIHeaders sets the browser-safety headers of every UI answer.
func setUIHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}
