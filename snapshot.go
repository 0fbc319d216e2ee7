package berth

import "time"

// Snapshot is an archive of a session's workspace (docs/api.md, "Snapshots"); a
// session created with from_snapshot starts in a copy of it.
type Snapshot struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	SizeBytes int64     `json:"size_bytes"`
	Files     int       `json:"files"`
	Skipped   int       `json:"skipped,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}
