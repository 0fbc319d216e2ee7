package http

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/berth-sh/berth"
)

// responseWriter records the status and size of a response for the request
// log and for panic recovery. Unwrap lets http.ResponseController reach the
// underlying writer's Flush. Every write gets writeTimeout to reach the
// client, so a client that stops reading cannot hold a handler (and its
// connection's place) forever.
type responseWriter struct {
	http.ResponseWriter
	status       int
	bytes        int64
	writeTimeout time.Duration
}

// extendDeadline gives the next write writeTimeout from now. Not every
// writer supports deadlines (tests' recorders); then there is no connection
// to protect.
func (w *responseWriter) extendDeadline() {
	_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.writeTimeout))
}

// WriteHeader records the first status written.
func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.extendDeadline()
	w.ResponseWriter.WriteHeader(code)
}

// Write counts the bytes written.
func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.extendDeadline()
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap returns the underlying writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequests gives every request its id (X-Request-ID, in the answer and
// the request's context) and logs it once it is answered, with its status,
// size, duration and the session it is about.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := takeRequestID(r)
		w.Header().Set(RequestIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		if apiPath(r.URL.Path) {
			setAPIHeaders(w.Header())
		}
		rw := &responseWriter{ResponseWriter: w, writeTimeout: s.writeTimeout()}
		// Also bounds what net/http writes itself (an answer the handler
		// left empty); the deadline of a previous request may be long past.
		rw.extendDeadline()
		defer func() {
			attrs := []any{"request_id", id, "method", r.Method, "path", logPath(r.URL.Path), "status", rw.status,
				"bytes", rw.bytes, "duration", time.Since(start), "remote", r.RemoteAddr}
			if sid := sessionOfPath(r.URL.Path); sid != "" {
				attrs = append(attrs, "session_id", sid)
			}
			// One line per request is for whoever debugs; a failed one is
			// a warning on a quiet terminal too.
			level := slog.LevelDebug
			if rw.status >= http.StatusInternalServerError {
				level = slog.LevelWarn
			}
			s.log.Log(r.Context(), level, "http request", attrs...)
		}()
		next.ServeHTTP(rw, r)
	})
}

// apiPath reports whether p is the API's (or the metrics'), not the UI's.
func apiPath(p string) bool {
	return p == "/v1" || strings.HasPrefix(p, "/v1/") || p == "/metrics" || strings.HasPrefix(p, "/metrics/")
}

// setAPIHeaders sets the headers of every API answer: session data is never
// kept in a browser's cache, and never sniffed as anything but what it says.
// The UI's files have their own (setUIHeaders).
func setAPIHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// recoverPanics turns a handler's panic into a logged 500 internal error
// (when nothing was written yet) instead of a dropped connection.
// http.ErrAbortHandler passes through: it is how a handler drops a
// connection on purpose.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			s.log.Error("panic in handler", "request_id", requestID(r.Context()), "method", r.Method, "path", logPath(r.URL.Path), "panic", v, "stack", string(debug.Stack()))
			if rw, ok := w.(*responseWriter); ok && rw.status != 0 {
				// The answer has begun: all that is left is to drop it.
				panic(http.ErrAbortHandler)
			}
			s.writeError(w, r, berth.Errorf(berth.EInternal, "panic"))
		}()
		next.ServeHTTP(w, r)
	})
}
