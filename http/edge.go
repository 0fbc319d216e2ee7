package http

import (
	"context"
	"log/slog"
	"net/http"
)

// edge is what every handler type and the middleware share: how an error
// is answered and logged (errors.go), how a body is decoded (decode.go),
// and the shutdown that long requests watch. Each handler type holds one
// and only the part of the service its routes call.
type edge struct {
	log *slog.Logger
	// maxPrompt is limits.max_prompt_bytes in force; request bodies are
	// capped a little above what such a prompt needs in JSON (bodyLimit).
	maxPrompt int
	// shutdown ends when Close begins; long requests (SSE, prompt waits)
	// watch it so that the graceful shutdown does not wait on them.
	shutdown context.Context
}

// requestContext returns a context that ends with the request or when the
// server begins to shut down, whichever comes first.
func (e *edge) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(e.shutdown, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// shuttingDown reports whether Close has begun.
func (e *edge) shuttingDown() bool { return e.shutdown.Err() != nil }

// readJSON decodes the body into v (decodeJSON) and answers the error when
// that fails; it reports whether the handler may go on.
func (e *edge) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := e.decodeJSON(w, r, v); err != nil {
		e.writeError(w, r, err)
		return false
	}
	return true
}

// reply answers err when there is one, else status with v as JSON: the end
// of every handler that answers what the service returned.
func (e *edge) reply(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		e.writeError(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

// callWithBody answers a route of session {id} whose body is a B: the body
// is decoded strictly, refused when one of checks says so, given to call,
// and what call returns is answered with status.
func callWithBody[B, R any](e *edge, w http.ResponseWriter, r *http.Request, status int,
	call func(ctx context.Context, id string, body B) (R, error), checks ...func(*B) error) {
	var body B
	if !e.readJSON(w, r, &body) {
		return
	}
	for _, check := range checks {
		if err := check(&body); err != nil {
			e.writeError(w, r, err)
			return
		}
	}
	res, err := call(r.Context(), r.PathValue("id"), body)
	e.reply(w, r, status, res, err)
}

// orEmpty returns s, or an empty slice when s is nil, so that a list
// answers [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
