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

// signIn serves the browser's sign-in (docs/api.md, Sign-in and browser
// safety): the token or a one-time code for a cookie, the logout, and the
// codes. The sets it changes are the server's, which checks them on every
// request (auth.go).
type signIn struct {
	*edge
	// token is ServerOptions.Token ("" when TCP needs none).
	token string
	// ttl is how long a sign-in lasts.
	ttl time.Duration
	// signins, codes and failed are Server's.
	signins *signInBook
	codes   *expiring
	failed  *failures
	// addr is the bound TCP address (Server.Addr).
	addr func() string
}

// handleLogin answers POST /v1/login: with the token or a live one-time code,
// 204 and a berth_session cookie holding a new random sign-in id (never the
// token), kept first (signInBook.add: 503 when the store cannot keep it);
// 401 otherwise, and 429 for a wrong one once the address made too many
// mistakes.
func (h *signIn) handleLogin(w http.ResponseWriter, r *http.Request) {
	addr := clientAddr(r)
	var req loginRequest
	if !h.readJSON(w, r, &req) {
		return
	}
	if (req.Token == "") == (req.Code == "") {
		h.writeError(w, r, berth.Errorf(berth.EInvalid, "give exactly one of token and code"))
		return
	}
	ok := false
	switch {
	case req.Code != "":
		ok = h.codes.take(req.Code)
	case h.token != "":
		want := sha256.Sum256([]byte(h.token))
		got := sha256.Sum256([]byte(req.Token))
		ok = subtle.ConstantTimeCompare(got[:], want[:]) == 1
	}
	if !ok {
		// Only wrong guesses are refused while blocked: the right token or
		// code always signs in.
		if !fromSocket(r) && (h.failed.blocked(addr) || h.failed.fail(addr)) {
			h.writeError(w, r, rateLimited())
			return
		}
		h.writeError(w, r, berth.Errorf(berth.EUnauthenticated, "wrong token or code (codes are valid two minutes, once)"))
		return
	}
	id, exp, err := h.signins.add(r.Context(), h.ttl)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", Expires: exp,
		MaxAge: int(h.ttl.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// handleLogout answers POST /v1/logout: the sign-in of the cookie ends on the
// server (in the store too), and the cookie is cleared. 204 whether or not
// one was live; 503 when the store could not end it (the cookie is cleared
// all the same).
func (h *signIn) handleLogout(w http.ResponseWriter, r *http.Request) {
	var err error
	if c, cerr := r.Cookie(CookieName); cerr == nil {
		err = h.signins.end(r.Context(), c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleLoginCode answers POST /v1/login/codes (the socket, or the token:
// a browser's cookie cannot mint more sign-ins) with a one-time code valid
// CodeTTL and the address http://<listen addr>/login#code=<code>: the code
// rides in the fragment, which browsers never send to a server.
func (h *signIn) handleLoginCode(w http.ResponseWriter, r *http.Request) {
	if via := authOf(r); via != viaSocket && via != viaToken {
		h.writeError(w, r, berth.Errorf(berth.EForbidden, "sign-in codes are made over the Unix socket or with the token"))
		return
	}
	addr := h.addr()
	if addr == "" {
		h.writeError(w, r, berth.Errorf(berth.EUnavailable, "the daemon has no TCP address to sign in at"))
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
	code, exp := h.codes.add(CodeTTL)
	writeJSON(w, http.StatusCreated, LoginCode{Code: code, ExpiresAt: exp.UTC(),
		URL: "http://" + net.JoinHostPort(host, port) + "/login#code=" + code})
}
