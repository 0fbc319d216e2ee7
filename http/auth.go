package http

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// authVia says how a request proved who it is.
type authVia int

// The ways a request is let in.
const (
	viaNone   authVia = iota // a public path, or token-less loopback
	viaSocket                // the Unix socket: its file mode is the check
	viaToken                 // Authorization: Bearer <token>
	viaCookie                // the berth_session sign-in cookie
	viaNode                  // another node's forward, with the node token
)

// authKey keys the authVia in a request's context.
type authKey struct{}

// authOf returns how r was let in.
func authOf(r *http.Request) authVia {
	v, _ := r.Context().Value(authKey{}).(authVia)
	return v
}

// authenticate lets a TCP request in when it carries the token as
// "Authorization: Bearer <token>" or a live sign-in cookie, and answers 401
// otherwise, 503 for a cookie the store cannot check (docs/api.md, Sign-in
// and browser safety). The Unix socket
// needs neither. Public paths (the sign-in endpoints and the pages, which
// carry no data) pass without. An address that sent maxFailures wrong
// tokens within a minute gets 429 for a minute for every wrong token; the
// right one still passes (the token is 256-bit random, so the limit is not
// what stops guessing). Both sides of the comparison are hashed first, so
// it does not leak the token's length either.
//
// A request that says another node forwarded it (ForwardedByHeader) is let
// in on TCP by the node token alone, when the cluster has one: neither the
// user's token nor a cookie, and the node token without the header is
// just a wrong token.
func (s *Server) authenticate(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.opts.Token))
	pass := func(w http.ResponseWriter, r *http.Request, via authVia) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authKey{}, via)))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case fromSocket(r):
			pass(w, r, viaSocket)
			return
		case s.nodeForwarded(r):
			if s.nodeTokenMatches(r) {
				pass(w, r, viaNode)
				return
			}
			s.wrongToken(w, r)
			return
		case s.opts.Token == "":
			// Listen allows no token only on loopback with
			// loopback_without_token.
			pass(w, r, viaNone)
			return
		}
		if header := r.Header.Get("Authorization"); header != "" {
			// The right token always passes: all loopback clients share
			// one address, so a block must not lock them out.
			if bearerMatches(header, want) {
				pass(w, r, viaToken)
				return
			}
			s.wrongToken(w, r)
			return
		}
		if c, err := r.Cookie(CookieName); err == nil {
			ok, err := s.signins.check(r.Context(), c.Value)
			switch {
			case ok:
				pass(w, r, viaCookie)
				return
			case err != nil && !publicPath(r):
				// A sign-in that cannot be checked is refused, never let in.
				s.refuse(w, r, err)
				return
			}
		}
		if publicPath(r) {
			pass(w, r, viaNone)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
		s.refuse(w, r, berth.Errorf(berth.EUnauthenticated,
			"sign in first: send Authorization: Bearer <token> (the token is in $BERTH_HOME/token) or sign in at /login"))
	})
}

// wrongToken answers a request whose bearer token is wrong: 401, or 429
// for an address that sent too many.
func (s *Server) wrongToken(w http.ResponseWriter, r *http.Request) {
	addr := clientAddr(r)
	if s.failed.blocked(addr) || s.failed.fail(addr) {
		s.refuse(w, r, rateLimited())
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
	s.refuse(w, r, berth.Errorf(berth.EUnauthenticated, "the bearer token is not valid"))
}

// nodeForwarded reports whether r, on TCP, says another node forwarded it
// and the cluster has a node token to check that with.
func (s *Server) nodeForwarded(r *http.Request) bool {
	return s.nodeToken != nil && !fromSocket(r) && r.Header.Get(ForwardedByHeader) != ""
}

// nodeTokenMatches reports whether r carries the node token.
func (s *Server) nodeTokenMatches(r *http.Request) bool {
	return s.nodeToken != nil && bearerMatches(r.Header.Get("Authorization"), *s.nodeToken)
}

// signInEnded reports whether r was let in by a sign-in cookie that has
// since ended (logout, expiry, a new token) or can no longer be checked.
// Long requests (SSE streams) check it before each write, so that an ended
// sign-in stops receiving data.
func (s *Server) signInEnded(r *http.Request) bool {
	if authOf(r) != viaCookie {
		return false
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return true
	}
	ok, err := s.signins.check(r.Context(), c.Value)
	return err != nil || !ok
}

// publicPath reports whether r may be served on TCP without a token: the
// sign-in endpoints, and GET or HEAD of anything outside /v1/ and /metrics
// (the web UI's pages and assets, which carry no data: the UI fetches data
// from the API, which asks for a token).
func publicPath(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && (p == "/v1/login" || p == "/v1/logout"):
		return true
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return false
	case p == "/v1" || strings.HasPrefix(p, "/v1/") || p == "/metrics" || strings.HasPrefix(p, "/metrics/"):
		return false
	}
	return true
}

// clientAddr returns the IP a TCP request came from, the unit of the
// wrong-token limit.
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// rateLimited is the error of a blocked address.
func rateLimited() error {
	return &berth.Error{Code: berth.ERateLimited, Message: "too many wrong tokens or codes from this address: try again in a minute",
		Details: map[string]any{"retry_after_seconds": int(blockFor.Seconds())}}
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
