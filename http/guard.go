package http

import (
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// corsAllowHeaders are the request headers a cross-origin caller in
// [server] allowed_origins may send.
const corsAllowHeaders = "Authorization, Content-Type, Last-Event-ID"

// corsAllowMethods are the methods the API answers.
const corsAllowMethods = "GET, POST, PATCH, PUT, DELETE"

// guardBrowser refuses, on TCP and before anything else runs, what a web page
// of another site could send (docs/api.md, Sign-in and browser safety): a
// Host that is not ours (DNS rebinding), an Origin that is not ours or
// allowed, a cross-site fetch without an Origin, and a request body that is
// not JSON (a form or a no-cors fetch cannot send one). It answers CORS
// preflights of allowed origins and adds CORS headers only for them. The
// Unix socket is not a browser's: its requests pass untouched.
func (s *Server) guardBrowser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Neither is another node's forward (the owner's Host is its
		// advertise address, which need not be an allowed host).
		if fromSocket(r) || s.nodeForwarded(r) && s.nodeTokenMatches(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !s.hostAllowed(r.Host) {
			s.refuse(w, r, berth.Errorf(berth.EForbidden, "the Host header names no address of this daemon; add it to [server] allowed_hosts"))
			return
		}
		origin := r.Header.Get("Origin")
		switch {
		case origin != "" && s.ownOrigin(r, origin):
		case origin != "" && s.allowedOrigin(origin):
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Add("Vary", "Origin")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", corsAllowMethods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		case origin != "":
			s.refuse(w, r, berth.Errorf(berth.EForbidden, "requests from origin %q are not allowed; add it to [server] allowed_origins", origin))
			return
		case strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") && !pageNavigation(r):
			s.refuse(w, r, berth.Errorf(berth.EForbidden, "cross-site requests are not allowed"))
			return
		}
		if writesBody(r) && !isJSON(r.Header.Get("Content-Type")) {
			s.refuse(w, r, berth.Errorf(berth.EUnsupportedMedia, "a request body must be Content-Type: application/json"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// pageNavigation reports whether r is a browser opening one of the UI's
// pages (a link followed from another site): a GET or HEAD navigation to a
// path outside the API, which carries no data and runs nothing.
func pageNavigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.EqualFold(r.Header.Get("Sec-Fetch-Mode"), "navigate") && publicPath(r)
}

// refuse answers err and closes the connection afterwards, so that a body
// nobody reads is not waited for.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if hasBody(r) {
		w.Header().Set("Connection", "close")
	}
	s.writeError(w, r, err)
}

// hostAllowed reports whether a Host header names this daemon: its listen
// host, a loopback name, or one of [server] allowed_hosts, with any port.
func (s *Server) hostAllowed(hostport string) bool {
	host := strings.ToLower(strings.TrimSuffix(hostOnly(hostport), "."))
	if host == "" {
		return false
	}
	switch host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	if listen := strings.ToLower(hostOnly(s.Addr())); listen != "" && host == listen {
		if ip := net.ParseIP(listen); ip == nil || !ip.IsUnspecified() {
			return true
		}
	}
	for _, h := range s.opts.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(h, "."), host) {
			return true
		}
	}
	return false
}

// hostOnly returns the host of "host:port", "[v6]:port", "[v6]" or "host".
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// ownOrigin reports whether origin is the origin the request was sent to:
// same scheme, and the Host header already checked by hostAllowed.
func (s *Server) ownOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

// allowedOrigin reports whether origin is in [server] allowed_origins.
func (s *Server) allowedOrigin(origin string) bool {
	for _, o := range s.opts.AllowedOrigins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	return false
}

// writesBody reports whether r is a POST, PATCH or PUT that carries a body.
func writesBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut:
		return hasBody(r)
	}
	return false
}

// hasBody reports whether r declares a body (a length or chunked encoding).
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// isJSON reports whether a Content-Type header is application/json (any
// parameters, such as charset, allowed).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
