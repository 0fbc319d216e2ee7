package client

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// The JSON shapes of the API's answers that wrap a list or a value.
type (
	// errorBody is every error answer: {"error":{"code","message","details"}}.
	errorBody struct {
		Error struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	agentList struct {
		Agents []berth.AgentInfo `json:"agents"`
	}
	eventPage struct {
		Events    []berth.Event `json:"events"`
		NextAfter int64         `json:"next_after"`
	}
	transcript struct {
		Turns []berth.TranscriptTurn `json:"turns"`
	}
	cancelResult struct {
		TurnID string `json:"turn_id"`
	}
	permissionList struct {
		Permissions []*berth.Permission `json:"permissions"`
	}
	snapshotList struct {
		Snapshots []*berth.Snapshot `json:"snapshots"`
	}
	hookList struct {
		Hooks []berth.HookInfo `json:"hooks"`
	}
)

// endComment is the SSE comment with which the daemon ends a session's
// stream once the whole log of a stopped session was sent.
const endComment = ": end"

// statusCodes maps the HTTP statuses of the API to its error codes, for an
// answer that carries no error body (a proxy's 502, say).
var statusCodes = map[int]string{
	http.StatusBadRequest:            berth.EInvalid,
	http.StatusUnauthorized:          berth.EUnauthenticated,
	http.StatusForbidden:             berth.EForbidden,
	http.StatusNotFound:              berth.ENotFound,
	http.StatusConflict:              berth.EConflict,
	http.StatusRequestEntityTooLarge: berth.ETooLarge,
	// 429 has two codes; a bare 429 is the older, queue_full.
	http.StatusTooManyRequests:      berth.EQueueFull,
	http.StatusUnsupportedMediaType: berth.EUnsupportedMedia,
	http.StatusMethodNotAllowed:     berth.EInvalid,
	http.StatusInternalServerError:  berth.EInternal,
}

// codeForStatus returns the error code that best matches an HTTP status.
func codeForStatus(status int) string {
	if code, ok := statusCodes[status]; ok {
		return code
	}
	switch {
	case status >= 500:
		return berth.EUnavailable
	case status >= 400:
		return berth.EInvalid
	}
	return berth.EInternal
}
