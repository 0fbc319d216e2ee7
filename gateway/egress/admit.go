package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/berth-sh/berth"
)

// maxDenied bounds the refusals a session remembers for coalescing: past
// that many distinct destinations within a window, new ones are refused
// without being told to Hooks.Denied.
const maxDenied = 1024

// target is a destination as a connection asks for it.
type target struct {
	host string // berth.NetworkHost.String
	port int
}

// entryFor is the allow-list entry that names exactly h:port.
func entryFor(h berth.NetworkHost, port int) string {
	return berth.NetworkEntry{NetworkHost: h, Port: port}.String()
}

// refusal is why a connection was not made: the status and the short
// message the client reads.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return r.msg }

// refused returns a refusal with status and a formatted message.
func refused(status int, format string, args ...any) *refusal {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// refuse answers w with err: a refusal's status and message, 503 when
// the session closes, 502 for anything else (whose cause, which may name
// the host's own addresses, goes to the log only).
func (s *Session) refuse(w http.ResponseWriter, err error) {
	var r *refusal
	switch {
	case errors.As(err, &r):
	case s.ctx.Err() != nil:
		r = refused(http.StatusServiceUnavailable, "this session's proxy is closed")
	default:
		s.log.Debug("egress: upstream failed", "err", err)
		r = refused(http.StatusBadGateway, "the destination failed")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(r.status)
	fmt.Fprintf(w, "berth egress: %s\n", r.msg)
}

// admitTarget parses a request's destination, host and port, and admits
// it (admit). A bad destination is answered 400 and a refusal as refuse
// answers it; either way ok is false and w has its answer.
func (s *Session) admitTarget(w http.ResponseWriter, r *http.Request, host, port string) (h berth.NetworkHost, n int, ok bool) {
	h, n, err := parseTarget(host, port)
	if err != nil {
		http.Error(w, "berth egress: "+err.Error(), http.StatusBadRequest)
		return h, n, false
	}
	if err := s.admit(r.Context(), h, n); err != nil {
		s.refuse(w, err)
		return h, n, false
	}
	return h, n, true
}

// admit decides whether a connection to h:port may go out: by the list,
// else by a question when the policy asks. A refusal is told to
// Hooks.Denied (unless a question refused it) and returned.
func (s *Session) admit(ctx context.Context, h berth.NetworkHost, port int) error {
	if s.listed(h, port) {
		return nil
	}
	t := target{h.String(), port}
	if !s.ask || s.hooks.Ask == nil {
		s.deny(t)
		return refused(http.StatusForbidden, "%s:%d is not in this session's network allow list (an entry %q would allow it)", t.host, port, entryFor(h, port))
	}
	// A question is never put about the host's own addresses: a click must
	// not open the host's loopback; only an entry at create can.
	if h.Addr.IsValid() && berth.InternalAddr(h.Addr) {
		s.deny(t)
		return refused(http.StatusForbidden, "%s is an address of the host or of its networks: only an entry in network.allow (%q) allows it, never a question", t.host, entryFor(h, port))
	}
	if s.rejectedRecently(t) {
		s.deny(t)
		return refused(http.StatusForbidden, "%s:%d was refused when asked", t.host, port)
	}
	d, err := s.question(ctx, h, port)
	var r *refusal
	switch {
	case errors.As(err, &r), err != nil && ctx.Err() != nil:
		return err
	case d == AllowOnce || d == AllowSession:
		return nil
	case err != nil && s.isClosed():
		// The question ended because the session's proxy closed.
		return refused(http.StatusServiceUnavailable, "this session's proxy is closed")
	case err != nil:
		s.log.Debug("egress: a question failed", "host", t.host, "port", port, "err", err)
		return refused(http.StatusForbidden, "%s:%d was not allowed: the question had no answer", t.host, port)
	}
	return refused(http.StatusForbidden, "%s:%d was refused when asked", t.host, port)
}

// isClosed reports whether the session's proxy is closed.
func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// listed reports whether an entry of the list allows h:port.
func (s *Session) listed(h berth.NetworkHost, port int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		if e.Allows(h, port) {
			return true
		}
	}
	return false
}

// deny tells Hooks.Denied of a refusal of t, unless it told it of one
// within the window (or remembers maxDenied others within it).
func (s *Session) deny(t target) {
	now := s.opts.Now()
	s.mu.Lock()
	last, seen := s.denied[t]
	tell := !seen || now.Sub(last) >= s.opts.Window
	if tell && !seen && len(s.denied) >= maxDenied {
		prune(s.denied, now, s.opts.Window)
		tell = len(s.denied) < maxDenied
	}
	if tell {
		s.denied[t] = now
	}
	s.mu.Unlock()
	if tell && s.hooks.Denied != nil {
		s.hooks.Denied(s.id, t.host, t.port)
	}
}

// rejectedRecently reports whether a question about t was answered
// Reject within the window.
func (s *Session) rejectedRecently(t target) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.rejected[t]
	return ok && s.opts.Now().Sub(at) < s.opts.Window
}

// prune drops the times older than window from m.
func prune(m map[target]time.Time, now time.Time, window time.Duration) {
	for t, at := range m {
		if now.Sub(at) >= window {
			delete(m, t)
		}
	}
}
