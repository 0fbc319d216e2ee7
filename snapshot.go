package berth

import "time"

// Snapshot is an archive of a session's workspace (docs/api.md,
// "Snapshots"); a session created with from_snapshot starts in a copy of
// it.
type Snapshot struct {
	// ID is the snapshot's id, "snap_" followed by a lower-case ULID.
	ID string `json:"id"`
	// SessionID is the session whose workspace was archived.
	SessionID string `json:"session_id"`
	// SizeBytes is the size of the compressed archive on disk.
	SizeBytes int64 `json:"size_bytes"`
	// Files counts the archived entries: regular files, directories and
	// symlinks (the workspace root itself is not an entry).
	Files int `json:"files"`
	// Skipped counts what the archive left out: FIFOs, sockets, devices,
	// symlinks that are absolute or resolve outside the workspace, and the
	// hidden paths.
	Skipped int `json:"skipped,omitempty"`
	// CreatedAt is when the archive was begun, in UTC.
	CreatedAt time.Time `json:"created_at"`
}
