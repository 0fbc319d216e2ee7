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

import "github.com/berth-sh/berth"

// idPrefix is the prefix of snapshot ids: "snap_" followed by a ULID.
const idPrefix = "snap"

// Snapshot describes one archived workspace: the API's, which a Store
// writes as the archive's metadata.
type Snapshot = berth.Snapshot
