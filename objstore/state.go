package objstore

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/ids"
)

// StateVersion is the format of state.json this berth writes: 2 packs
// small files (File.Pack), which a berth that reads only version 1 would
// look for as blobs. ReadState reads version 1 too (every file a blob).
const StateVersion = 2

// oldestStateVersion is the oldest format ReadState reads.
const oldestStateVersion = 1

// maxStateBytes bounds a state.json or a checkpoint's JSON read back.
const maxStateBytes = 512 << 20

// State is a session's state.json: as of its last completed turn, the
// event seq of that turn's turn_ended, the turn, and the manifests of its
// workspace (a managed one only) and its private HOME, whose blobs are
// all in the store before it is written.
type State struct {
	V         int       `json:"v"`
	SessionID string    `json:"session_id"`
	Seq       int64     `json:"seq"`
	TurnID    string    `json:"turn_id,omitempty"`
	At        time.Time `json:"at"`
	// Workspace is nil for a session whose workspace is a host path (it
	// does not move).
	Workspace *Tree `json:"workspace,omitempty"`
	Home      *Tree `json:"home,omitempty"`
	// Checkpoints are the ids of the session's checkpoints in the store.
	Checkpoints []string `json:"checkpoints,omitempty"`
}

// Tree is the manifest of one directory: its paths, parents before their
// children, and what was left out (as a checkpoint leaves it out).
type Tree struct {
	Files        []File            `json:"files"`
	Skipped      []checkpoint.Skip `json:"skipped,omitempty"`
	SkippedTotal int               `json:"skipped_total,omitempty"`
}

// File is one path of a Tree.
type File struct {
	Path string `json:"path"`
	// Kind is checkpoint.KindDir, KindFile or KindSymlink.
	Kind string `json:"kind"`
	Mode uint32 `json:"mode"`
	Size int64  `json:"size,omitempty"`
	// SHA256 is the SHA-256 of the file's content, which is the blob it
	// names (blobs/sha256/<2 hex>/<hex>) unless Pack is set; an empty
	// file's content is in no object.
	SHA256 string `json:"sha256,omitempty"`
	// Pack, when set, is the SHA-256 of the pack holding the file's Size
	// bytes at Offset (packs/sha256/<2 hex>/<hex>, PackKey).
	Pack   string `json:"pack,omitempty"`
	Offset int64  `json:"offset,omitempty"`
	// Target is a symlink's target (never out of the tree).
	Target string `json:"target,omitempty"`
}

// StoredCheckpoint is sessions/<id>/checkpoints/<ckpt>.json: what the API
// shows of the checkpoint and its whole manifest, or instead (Delta) the
// changes since an earlier checkpoint of the session in the store.
type StoredCheckpoint struct {
	Checkpoint *checkpoint.Checkpoint `json:"checkpoint,omitempty"`
	Files      []File                 `json:"files,omitempty"`
	// Delta is set alone: a berth that reads only whole checkpoints finds
	// no checkpoint in it, and passes it over as damaged.
	Delta *CheckpointDelta `json:"delta,omitempty"`
}

// CheckpointDelta is a checkpoint as the changes since its Base: the
// files added or changed, the paths removed.
type CheckpointDelta struct {
	Checkpoint *checkpoint.Checkpoint `json:"checkpoint"`
	Base       string                 `json:"base"`
	Files      []File                 `json:"files"`
	Removed    []string               `json:"removed,omitempty"`
}

// Keys of the layout (relative to the URL's prefix).

// BlobKey is the key of the blob of hash.
func BlobKey(hash string) string { return "blobs/sha256/" + hash[:2] + "/" + hash }

// PackKey is the key of the pack of hash.
func PackKey(hash string) string { return "packs/sha256/" + hash[:2] + "/" + hash }

// SessionKey is the prefix of the session's objects.
func SessionKey(id string) string { return "sessions/" + id + "/" }

// StateKey is the key of the session's state.json.
func StateKey(id string) string { return SessionKey(id) + "state.json" }

// CheckpointKey is the key of one checkpoint of the session.
func CheckpointKey(id, ckpt string) string { return SessionKey(id) + "checkpoints/" + ckpt + ".json" }

// SnapshotKey is the key of one snapshot archive of the session.
func SnapshotKey(id, name string) string { return SessionKey(id) + "snapshots/" + name }

// ReadState reads the session's state.json: ENotFound when the store has
// none, EInternal when it is not one this berth can restore.
func ReadState(ctx context.Context, c *Client, sessionID string) (*State, error) {
	if !ids.ValidName(sessionID) {
		return nil, berth.Errorf(berth.EInvalid, "invalid session id")
	}
	var st State
	if err := c.getJSON(ctx, StateKey(sessionID), &st); err != nil {
		return nil, err
	}
	if st.V < oldestStateVersion || st.V > StateVersion || st.SessionID != sessionID {
		return nil, berth.Errorf(berth.EInternal, "object store: the state of session %s is not one this berth can read (version %d)", sessionID, st.V)
	}
	return &st, nil
}

// getJSON reads the object at key into v: one GET, so an object
// rewritten meanwhile (a session's state.json, written again by its node)
// is read as one version whole.
func (c *Client) getJSON(ctx context.Context, key string, v any) error {
	r, size, err := c.Get(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	if size > maxStateBytes {
		return berth.Errorf(berth.EInternal, "object store: %s is too large", key)
	}
	b, err := io.ReadAll(io.LimitReader(r, maxStateBytes))
	if err != nil {
		return c.wrap(err, "read %s", key)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return berth.WrapError(berth.EInternal, err, "object store: %s is damaged", key)
	}
	return nil
}

// putJSON writes v at key in one PUT.
func (c *Client) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "encode %s", key)
	}
	return c.Put(ctx, key, bytes.NewReader(b), int64(len(b)))
}
