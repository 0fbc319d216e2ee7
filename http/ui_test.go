package http

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-sh/berth/web"
)

// getUI fetches path over TCP without any credential.
func getUI(t *testing.T, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.Host = "127.0.0.1:7380"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestUIPagesAndFilesNeedNoTokenAndCarrySafetyHeaders(t *testing.T) {
	h := NewServer(newFakeService(), ServerOptions{Token: testToken}).Handler()
	for _, tt := range []struct{ path, ctype string }{
		{"/", "text/html; charset=utf-8"},
		{"/login", "text/html; charset=utf-8"},
		{"/sessions/ses_1", "text/html; charset=utf-8"},
		{"/ui/js/app.js", "text/javascript; charset=utf-8"},
		{"/ui/style.css", "text/css; charset=utf-8"},
	} {
		rec := getUI(t, h, tt.path)
		if rec.Code != 200 || rec.Header().Get("Content-Type") != tt.ctype {
			t.Fatalf("GET %s = %d %q, want 200 %q", tt.path, rec.Code, rec.Header().Get("Content-Type"), tt.ctype)
		}
		csp := rec.Header().Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "default-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Fatalf("GET %s: CSP %q lacks %q", tt.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Fatalf("GET %s: CSP %q allows unsafe sources", tt.path, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: no X-Content-Type-Options: nosniff", tt.path)
		}
	}
	// The API still needs the token; a directory is not listed; a path
	// outside the files is not found.
	for path, want := range map[string]int{"/v1/sessions": 401, "/ui/js/": 404, "/ui/../go.mod": 404, "/ui/nope.js": 404} {
		if rec := getUI(t, h, path); rec.Code != want {
			t.Fatalf("GET %s = %d, want %d", path, rec.Code, want)
		}
	}
}

// TestUIFilesAreSmallAndBuildNoMarkupFromText keeps the UI within its
// payload budget and its code free of the ways text becomes markup or
// code (innerHTML and friends, eval, inline handlers and styles that the
// CSP would block anyway).
func TestUIFilesAreSmallAndBuildNoMarkupFromText(t *testing.T) {
	banned := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setAttribute\('on|localStorage|sessionStorage`)
	inline := regexp.MustCompile(`<script>|<script [^>]*>[^<]|\son[a-z]+=|style=`)
	total := 0
	err := fs.WalkDir(web.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(web.FS, path)
		if err != nil {
			return err
		}
		total += len(b)
		switch {
		case strings.HasSuffix(path, ".js"):
			if m := banned.Find(b); m != nil {
				t.Errorf("%s uses %s", path, m)
			}
		case strings.HasSuffix(path, ".html"):
			if m := inline.Find(b); m != nil {
				t.Errorf("%s has inline %s", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("UI payload: %d bytes uncompressed", total)
	if total > 150*1024 {
		t.Fatalf("the UI is %d bytes, over its 150 KiB budget", total)
	}
}
