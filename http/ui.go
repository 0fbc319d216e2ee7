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

// ui serves the web UI (docs/api.md, Web UI): one HTML shell for every
// screen's address (the modules read the path) and the files under
// uiPrefix. They carry no data, so they need no auth: every API call the
// page makes does.
type ui struct {
	*edge
	// files serves the UI's files under uiPrefix (handleFile).
	files http.Handler
}

// newUI returns the UI's handlers.
func newUI(e *edge) *ui {
	u := &ui{edge: e}
	files := http.FileServerFS(web.FS)
	u.files = http.StripPrefix(strings.TrimSuffix(uiPrefix, "/"), http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			// Only files are served (no directory listings); anything else
			// is the API's JSON 404.
			name := strings.TrimPrefix(r.URL.Path, "/")
			if info, err := fs.Stat(web.FS, name); err != nil || info.IsDir() || name == "" {
				u.writeError(w, r, berth.Errorf(berth.ENotFound, "no UI file %s", r.URL.Path))
				return
			}
			setUIHeaders(w)
			files.ServeHTTP(w, r)
		}))
	return u
}

// handlePage serves the UI's HTML shell.
func (u *ui) handlePage(w http.ResponseWriter, r *http.Request) {
	page, err := fs.ReadFile(web.FS, "index.html")
	if err != nil {
		u.writeError(w, r, err)
		return
	}
	setUIHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page)
}

// handleFile serves one of the UI's files, GET uiPrefix+name.
func (u *ui) handleFile(w http.ResponseWriter, r *http.Request) { u.files.ServeHTTP(w, r) }

// setUIHeaders sets the browser-safety headers of every UI answer.
func setUIHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}
