package http

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"time"

	"github.com/berth-sh/berth"
)

// loginRequest is the body of POST /v1/login: the token or a one-time code.
type loginRequest struct {
	Token string `json:"token,omitempty"`
	Code  string `json:"code,omitempty"`
}

// LoginCode is the answer of POST /v1/login/codes: a one-time sign-in code
// and the address that uses it.
type LoginCode struct {
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
	URL       string    `json:"url"`
}

// sessionTTL returns how long a sign-in lasts.
func (s *Server) sessionTTL() time.Duration {
	if s.opts.SessionTTL > 0 {
		return s.opts.SessionTTL
	}
	return DefaultSessionTTL
}

// handleLogin answers POST /v1/login: with the token or a live one-time code,
// 204 and a berth_session cookie holding a new random sign-in id (never the
// token); 401 otherwise, and 429 for a wrong one once the address made too
// many mistakes.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	addr := clientAddr(r)
	var req loginRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if (req.Token == "") == (req.Code == "") {
		s.writeError(w, r, berth.Errorf(berth.EInvalid, "give exactly one of token and code"))
		return
	}
	ok := false
	switch {
	case req.Code != "":
		ok = s.codes.take(req.Code)
	case s.opts.Token != "":
		want := sha256.Sum256([]byte(s.opts.Token))
		got := sha256.Sum256([]byte(req.Token))
		ok = subtle.ConstantTimeCompare(got[:], want[:]) == 1
	}
	if !ok {
		// Only wrong guesses are refused while blocked: the right token or
		// code always signs in.
		if !fromSocket(r) && (s.failed.blocked(addr) || s.failed.fail(addr)) {
			s.writeError(w, r, rateLimited())
			return
		}
		s.writeError(w, r, berth.Errorf(berth.EUnauthenticated, "wrong token or code (codes are valid two minutes, once)"))
		return
	}
	id, exp := s.signins.add(s.sessionTTL())
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", Expires: exp,
		MaxAge: int(s.sessionTTL().Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// handleLogout answers POST /v1/logout: the sign-in of the cookie ends on the
// server, and the cookie is cleared. 204 whether or not one was live.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil {
		s.signins.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// handleLoginCode answers POST /v1/login/codes (the socket, or the token:
// a browser's cookie cannot mint more sign-ins) with a one-time code valid
// CodeTTL and the address http://<listen addr>/login#code=<code>: the code
// rides in the fragment, which browsers never send to a server.
func (s *Server) handleLoginCode(w http.ResponseWriter, r *http.Request) {
	if via := authOf(r); via != viaSocket && via != viaToken {
		s.writeError(w, r, berth.Errorf(berth.EForbidden, "sign-in codes are made over the Unix socket or with the token"))
		return
	}
	addr := s.Addr()
	if addr == "" {
		s.writeError(w, r, berth.Errorf(berth.EUnavailable, "the daemon has no TCP address to sign in at"))
		return
	}
	host, port, _ := net.SplitHostPort(addr)
	// A wildcard listener is reached on loopback from this machine.
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	code, exp := s.codes.add(CodeTTL)
	writeJSON(w, http.StatusCreated, LoginCode{Code: code, ExpiresAt: exp.UTC(),
		URL: "http://" + net.JoinHostPort(host, port) + "/login#code=" + code})
}
