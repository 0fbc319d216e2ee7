// Package checkpoint records a session's workspace before every turn in a
// content-addressed, deduplicated store, and restores it.
//
// Layout under the store's directory (usually $BERTH_HOME/checkpoints,
// every directory 0700, every file 0600):
//
//	blobs/ab/abcdef…            file contents, named by their SHA-256
//	incoming/.tmp-…/            the blobs an import (import.go) fetches,
//	                            until they are put in place
//	sessions/<sid>/<id>.entries the manifest: one Entry per path
//	sessions/<sid>/<id>.json    the Checkpoint (what the API lists)
//	sessions/<sid>/tree         the tree the session's checkpoints count in
//	sessions/<sid>/pruned       the id of its newest checkpoint pruned
//
// Every file is written to a temporary name, synced and renamed: blobs
// first, then the manifest, then the metadata, so a checkpoint exists once
// its metadata file does and every blob it names is on disk by then.
//
// A file whose (size, mtime, ctime, inode, device) are those the previous
// checkpoint of the session recorded is not read again: its hash is
// reused, and an unchanged workspace costs a directory walk and a manifest.
//
// Blobs are shared by every checkpoint of every session. What the
// checkpoints of each tree of sessions take is counted (index.go), and
// Prune removes a tree's oldest past Options.MaxTreeBytes (prune.go).
// Delete and Prune remove a blob once no checkpoint names it, and a sweep
// at open what a crash left; creates and restores hold removals off while
// they need a blob, so a blob is never removed under a checkpoint that
// needs it, a crash included.
package checkpoint

import (
	"path"
	"strings"

	"github.com/berth-sh/berth"
)

// idPrefix begins every checkpoint id: "ckpt_" and a ULID.
const idPrefix = "ckpt"

// Entry kinds.
const (
	KindDir     = "dir"
	KindFile    = "file"
	KindSymlink = "symlink"
)

// Skip reasons.
const (
	// SkipGitignore: the path matches the workspace's .gitignore files.
	SkipGitignore = "gitignored"
	// SkipVCS: a .git directory (the repository's own history).
	SkipVCS = "vcs"
	// SkipTooLarge: a file over the store's MaxFileBytes.
	SkipTooLarge = "too_large"
	// SkipTotal: a file that would take the checkpoint over MaxTotalBytes
	// or MaxEntries.
	SkipTotal = "total_limit"
	// SkipSpecial: a FIFO, socket or device.
	SkipSpecial = "special"
	// SkipLinkOutside: a symlink that is absolute or resolves outside the
	// workspace.
	SkipLinkOutside = "symlink_outside"
	// SkipHidden: a path no sandbox may see (the daemon's home).
	SkipHidden = "hidden"
	// SkipChanged: a file that changed while it was read.
	SkipChanged = "changed"
	// SkipTooDeep: a directory more than MaxDepth levels down, or a path
	// longer than MaxPathBytes: what is below it is not walked.
	SkipTooDeep = "too_deep"
	// SkipUnreadable: a file or directory the daemon may not read (an
	// agent's chmod 000, under a daemon that is not root).
	SkipUnreadable = "unreadable"
)

// Bounds of the walk an agent's workspace cannot lift: every directory
// level holds a descriptor open while the walk is below it, and every
// kept path is a string the checkpoint keeps (a deep chain of long names
// would make their sum grow with the square of the depth).
const (
	// MaxDepth is the deepest directory level walked ("a/b" is level 2).
	MaxDepth = 256
	// MaxPathBytes bounds one path's length (PATH_MAX).
	MaxPathBytes = 4096
	// DefaultMaxPathTotalBytes bounds the sum of a checkpoint's path
	// lengths (Options.MaxPathTotalBytes); paths past it are skipped as
	// total_limit.
	DefaultMaxPathTotalBytes = 64 << 20
)

// MaxListedSkips bounds the skipped paths a Checkpoint lists; SkippedTotal
// counts them all.
const MaxListedSkips = 100

// Skip is a path a checkpoint left out, and why: the API's.
type Skip = berth.CheckpointSkip

// Checkpoint describes one recorded workspace state: what the API shows
// of it (docs/api.md, "Checkpoints, rewind and fork"; Skipped lists up to
// MaxListedSkips), and the session it belongs to.
type Checkpoint struct {
	berth.Checkpoint
	SessionID string `json:"session_id"`
}

// Entry is one path of a manifest. The stat fields (MTime … GID) are how
// the next checkpoint knows an unchanged file without reading it, and whom
// a restored file belongs to.
type Entry struct {
	Path   string `json:"p"`
	Kind   string `json:"k"`
	Mode   uint32 `json:"m"`
	Size   int64  `json:"s,omitempty"`
	Hash   string `json:"h,omitempty"`
	Target string `json:"t,omitempty"`
	MTime  int64  `json:"mt,omitempty"`
	CTime  int64  `json:"ct,omitempty"`
	Ino    uint64 `json:"i,omitempty"`
	Dev    uint64 `json:"d,omitempty"`
	UID    int    `json:"u,omitempty"`
	GID    int    `json:"g,omitempty"`
}

// sameStat reports whether e and o describe the same, unchanged file.
func (e *Entry) sameStat(o *Entry) bool {
	return e.Kind == o.Kind && e.Size == o.Size && e.MTime == o.MTime && e.CTime == o.CTime &&
		e.Ino == o.Ino && e.Dev == o.Dev && e.Mode == o.Mode
}

// validEntryPath reports whether p is a clean relative path inside the
// workspace: no "..", no "." component, not absolute, no NUL.
func validEntryPath(p string) bool {
	if p == "" || p == "." || path.IsAbs(p) || strings.ContainsRune(p, 0) || path.Clean(p) != p {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." || c == "." || c == "" {
			return false
		}
	}
	return true
}

// validHash reports whether h is a lower-case hex SHA-256.
func validHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
