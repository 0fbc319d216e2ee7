// Package berth holds the domain of the berth daemon: sessions, events,
// turns, permissions, the error codes every layer speaks, and the Store and
// Sandbox interfaces that backends and providers implement. It imports only
// the standard library and internal/core, whose names it re-exports.
package berth

import "github.com/berth-sh/berth/internal/core"

// Error codes (internal/core holds them, for the shim). They become HTTP
// statuses and exit codes only at the edge (http/ and cmd/berth); inside
// the daemon they travel wrapped in *Error.
const (
	EInvalid          = core.EInvalid
	EUnauthenticated  = core.EUnauthenticated
	EForbidden        = core.EForbidden
	ENotFound         = core.ENotFound
	EConflict         = core.EConflict
	ETooLarge         = core.ETooLarge
	EQueueFull        = core.EQueueFull
	EUnsupportedMedia = core.EUnsupportedMedia
	ERateLimited      = core.ERateLimited
	EUnavailable      = core.EUnavailable
	ELeaseLost        = core.ELeaseLost
	ENodeLost         = core.ENodeLost
	EInternal         = core.EInternal
)

// Error is an error with a code (core.Error).
type Error = core.Error

// Errorf returns an *Error with code and a formatted, user-safe message.
func Errorf(code, format string, args ...any) *Error { return core.Errorf(code, format, args...) }

// WrapError returns an *Error with code and message whose cause is err.
func WrapError(code string, err error, format string, args ...any) *Error {
	return core.WrapError(code, err, format, args...)
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) string { return core.ErrorCode(err) }

// ErrorMessage returns the user-safe message of err: the message of its
// *Error, or "internal error" when err carries no code.
func ErrorMessage(err error) string { return core.ErrorMessage(err) }

// ErrorDetails returns the details of the first *Error in err's chain.
func ErrorDetails(err error) map[string]any { return core.ErrorDetails(err) }

// IsCode reports whether err carries code.
func IsCode(err error, code string) bool { return core.IsCode(err, code) }
