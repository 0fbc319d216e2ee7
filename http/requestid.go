package http

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
)

// RequestIDHeader carries a request's id in and out: taken from the
// request when it is a sane token, made otherwise, and set on the answer.
const RequestIDHeader = "X-Request-ID"

// maxRequestID bounds a request id taken from a client.
const maxRequestID = 128

// requestIDKey keys the request id in a request's context.
type requestIDKey struct{}

// requestID is the id of the request ctx belongs to ("" outside one).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// takeRequestID is the client's X-Request-ID when it is 1..128 characters
// of letters, digits and . _ : - (anything else could forge log lines or
// headers), else a new random one.
func takeRequestID(r *http.Request) string {
	if id := r.Header.Get(RequestIDHeader); id != "" && len(id) <= maxRequestID && strings.IndexFunc(id, badIDRune) < 0 {
		return id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// badIDRune reports a character a request id may not hold.
func badIDRune(c rune) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-')
}

// sessionOfPath is the session id a /v1/sessions/{id}… path names ("" for
// any other path), for the request's log line.
func sessionOfPath(p string) string {
	rest, ok := strings.CutPrefix(p, "/v1/sessions/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}
