package berth

import "time"

// Lease says which node owns a session's runtime. Token is a fencing token:
// it grows every time the lease changes hands, so a node that lost the
// lease can tell its writes are stale.
type Lease struct {
	SessionID string    `json:"session_id"`
	Owner     string    `json:"owner"`
	Token     int64     `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}
