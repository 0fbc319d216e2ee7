package http

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/berth-sh/berth"
)

// errorBody is the JSON shape of every error answer (docs/api.md, Errors):
// {"error":{"code","message","details"}}.
type errorBody struct {
	Error errorObject `json:"error"`
}

// errorObject is the inside of an error answer.
type errorObject struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

// codeStatus maps each error code to its HTTP status.
var codeStatus = map[string]int{
	berth.EInvalid:          http.StatusBadRequest,
	berth.EUnauthenticated:  http.StatusUnauthorized,
	berth.EForbidden:        http.StatusForbidden,
	berth.ENotFound:         http.StatusNotFound,
	berth.EConflict:         http.StatusConflict,
	berth.ETooLarge:         http.StatusRequestEntityTooLarge,
	berth.EQueueFull:        http.StatusTooManyRequests,
	berth.EUnsupportedMedia: http.StatusUnsupportedMediaType,
	berth.ERateLimited:      http.StatusTooManyRequests,
	berth.EUnavailable:      http.StatusServiceUnavailable,
	berth.EInternal:         http.StatusInternalServerError,
}

// StatusForCode returns the HTTP status of an error code; unknown codes are
// 500.
func StatusForCode(code string) int {
	if st, ok := codeStatus[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// writeJSON answers status with v encoded as JSON, with the API's headers
// (no caching, no sniffing). HTML characters are kept as they are: the API
// is not HTML.
func writeJSON(w http.ResponseWriter, status int, v any) {
	setAPIHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	// A failed write means the client is gone; there is no one to tell.
	_ = enc.Encode(v)
}

// errorObjectOf builds the error answer for err: the code, the user-safe
// message and the details of its *berth.Error; internal errors say only
// "internal error" and carry no details.
//
// The codes of a cluster's internals (lease_lost, node_lost) are not in the
// API's list (docs/api.md, Errors): they answer unavailable, with the
// internal code as details.reason, since a retry finds the session's new
// owner.
func errorObjectOf(err error) errorObject {
	code := berth.ErrorCode(err)
	obj := errorObject{Code: code, Message: berth.ErrorMessage(err), Details: berth.ErrorDetails(err)}
	if code == berth.EInternal {
		obj.Message, obj.Details = "internal error", nil
	}
	if obj.Details == nil {
		obj.Details = map[string]any{}
	}
	if code == berth.ELeaseLost || code == berth.ENodeLost {
		details := make(map[string]any, len(obj.Details)+1)
		for k, v := range obj.Details {
			details[k] = v
		}
		details["reason"] = code
		obj.Code, obj.Details = berth.EUnavailable, details
	}
	return obj
}

// writeError answers err as a JSON error with the status of its code. An
// internal error is logged with its cause; so is any error that reaches a
// client that already went away (at debug level: that is not a fault).
func (e *edge) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e.writeErrorStatus(w, r, err, 0)
}

// writeErrorStatus is writeError with an explicit status (0: from the code).
func (e *edge) writeErrorStatus(w http.ResponseWriter, r *http.Request, err error, status int) {
	// A request cut short by the shutdown is not an internal error.
	if e.shuttingDown() && errors.Is(err, context.Canceled) && berth.ErrorCode(err) == berth.EInternal {
		err = berth.WrapError(berth.EUnavailable, err, "the daemon is shutting down")
	}
	obj := errorObjectOf(err)
	if status == 0 {
		status = StatusForCode(obj.Code)
	}
	switch {
	case r.Context().Err() != nil && errors.Is(err, context.Canceled):
		e.log.Debug("request ended by the client", "request_id", requestID(r.Context()), "method", r.Method, "path", logPath(r.URL.Path), "err", err)
	case obj.Code == berth.EInternal:
		e.log.Error("internal error", "request_id", requestID(r.Context()), "method", r.Method, "path", logPath(r.URL.Path), "err", err)
	default:
		e.log.Debug("request failed", "request_id", requestID(r.Context()), "method", r.Method, "path", logPath(r.URL.Path), "code", obj.Code, "err", err)
	}
	if secs, ok := obj.Details["retry_after_seconds"].(int); ok && status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	writeJSON(w, status, errorBody{Error: obj})
}

// logError logs an error that cannot be answered any more (the response has
// started), at the level its code deserves.
func (e *edge) logError(r *http.Request, msg string, err error) {
	level := slog.LevelDebug
	if berth.ErrorCode(err) == berth.EInternal && !errors.Is(err, context.Canceled) {
		level = slog.LevelError
	}
	e.log.Log(r.Context(), level, msg, "method", r.Method, "path", logPath(r.URL.Path), "err", err)
}
