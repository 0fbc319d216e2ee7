// Package snapshot archives session workspaces as zstd-compressed tar files
// and restores them.
//
// A Store keeps each session's snapshots under its own directory:
//
//	<dir>/<sessionID>/<snapID>.tar.zst   the archive
//	<dir>/<sessionID>/<snapID>.json      its metadata (a Snapshot)
//
// Both files are written to a temporary name, fsynced and renamed, the
// archive first: a snapshot exists once its metadata file does.
//
// Create archives regular files, directories and symlinks, never following
// a symlink, and leaves out anything else (FIFOs, sockets, devices) and any
// symlink that is absolute or resolves outside the workspace, since Restore
// would refuse it. Restore extracts through os.Root and refuses, with
// berth.EInvalid and without leaving anything behind, any archive that would
// write or point outside its destination.
package snapshot

import "time"

// idPrefix is the prefix of snapshot ids: "snap_" followed by a ULID.
const idPrefix = "snap"

// Snapshot describes one archived workspace.
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
	// Skipped counts what Create left out: FIFOs, sockets, devices,
	// symlinks that are absolute or resolve outside the workspace, and the
	// hidden paths it was given.
	Skipped int `json:"skipped,omitempty"`
	// CreatedAt is when Create started, in UTC.
	CreatedAt time.Time `json:"created_at"`
}
