// Package core is the part of package berth that a shim links: the error
// codes every layer speaks and the sandbox contract (providers, configs,
// processes). Package berth re-exports every name of it (berth.Error is
// core.Error); only the shim's side (package shim, the sandbox providers
// it runs, and what they import) names core directly.
//
// It imports only standard packages that Go initialises before regexp:
// a plain `go build` of berth enters the shim from an init function
// (cmd/berth/internal/childentry), which runs before the daemon's heavy
// libraries only while nothing the shim imports waits for them. Package
// berth imports net/netip and net/url, which do.
package core

import (
	"errors"
	"fmt"
)

// Error codes. They become HTTP statuses and exit codes only at the edge
// (http/ and cmd/berth); inside the daemon they travel wrapped in *Error.
const (
	EInvalid         = "invalid_argument"
	EUnauthenticated = "unauthenticated"
	EForbidden       = "permission_denied"
	ENotFound        = "not_found"
	EConflict        = "conflict"
	ETooLarge        = "payload_too_large"
	EQueueFull       = "queue_full"
	// EUnsupportedMedia refuses a request body that is not JSON (HTTP 415).
	EUnsupportedMedia = "unsupported_media_type"
	// ERateLimited refuses an address that guessed wrong too often (HTTP
	// 429), and a model call past a session's budget (BudgetSpent).
	ERateLimited = "rate_limited"
	EUnavailable = "unavailable"
	// ELeaseLost: this node no longer holds the session's lease; another
	// node took it over (docs/api.md, "Cluster nodes: ownership and
	// failover"). Nothing was written.
	ELeaseLost = "lease_lost"
	// ENodeLost: this node was marked lost by the others; it must stop
	// driving every session.
	ENodeLost = "node_lost"
	EInternal = "internal"
)

// Error is an error that a user may see. Message is safe to show: it never
// holds a host path or a stack trace. Err, when set, is the cause kept for
// the log only.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	Err     error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted, user-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WrapError returns an *Error with code and message whose cause is err.
func WrapError(code string, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the user-safe message of err: the message of its
// *Error, or "internal error" when err carries no code.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != EInternal {
		return e.Message
	}
	return "internal error"
}

// ErrorDetails returns the details of the first *Error in err's chain.
func ErrorDetails(err error) map[string]any {
	var e *Error
	if errors.As(err, &e) {
		return e.Details
	}
	return nil
}

// IsCode reports whether err carries code.
func IsCode(err error, code string) bool { return err != nil && ErrorCode(err) == code }
