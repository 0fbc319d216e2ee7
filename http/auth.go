package http

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// authenticate refuses every request that lacks "Authorization: Bearer
// <token>" when the server has a token, except the web UI's pages and
// files, which carry no data. Both sides are hashed first, so the
// constant-time comparison does not leak the token's length either.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.opts.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.opts.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isUIRequest(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !bearerMatches(r.Header.Get("Authorization"), want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
			s.writeError(w, r, berth.Errorf(berth.EUnauthenticated, "a valid bearer token is required (Authorization: Bearer <token>)"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerMatches reports whether header is "Bearer <token>" (the scheme is
// case-insensitive) with a token whose SHA-256 is want.
func bearerMatches(header string, want [sha256.Size]byte) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
