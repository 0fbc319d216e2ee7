package objstore

import (
	"context"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/ids"
)

// RestoreCheckpoints brings the checkpoints of session sessionID, of the
// tree whose root is tree (its root_id), from the store into the local
// checkpoint store cs, oldest first, so that rewind and fork work on the
// node the session moved to (docs/api.md, "Failover with an object
// store"), and returns how many it brought. A checkpoint cs has already
// is left as it is. The checkpoints the session's node had pruned when it
// last wrote the session's state (those its state.json does not name,
// older than the newest it names) stay in the store: they count in no
// tree any more.
//
// Each checkpoint is read whole (bounded as a state.json is) and imported
// with checkpoint.Store.ImportIn: its blobs the local store lacks fetched
// and checked against their hashes, its paths checked as a manifest's. A
// checkpoint that is damaged or names a blob the store lost is passed
// over and the next is tried; its error is returned at the end. Any other
// error (the store unreachable) stops it.
//
// near, when set, is asked first for each blob (NearBlobs: the files just
// restored hold most of them); a blob it does not have is read from the
// store.
func RestoreCheckpoints(ctx context.Context, c *Client, cs *checkpoint.Store, tree, sessionID string, near checkpoint.BlobSource) (int, error) {
	if !ids.ValidName(sessionID) || !ids.ValidName(tree) {
		return 0, berth.Errorf(berth.EInvalid, "invalid session id")
	}
	want, err := storedCheckpoints(ctx, c, sessionID)
	if err != nil {
		return 0, err
	}
	local, err := cs.List(sessionID)
	if err != nil {
		return 0, err
	}
	here := make(map[string]bool, len(local))
	for _, l := range local {
		here[l.ID] = true
	}
	want = slices.DeleteFunc(want, func(id string) bool { return here[id] })
	n := 0
	var passed error
	// The checkpoint read last: the next, a delta on it, is read alone.
	var last *resolvedCheckpoint
	for _, id := range want {
		read, err := readCheckpoint(ctx, c, sessionID, id, last)
		if err == nil {
			last = read
			err = restoreCheckpoint(ctx, c, cs, tree, sessionID, read, near)
		}
		switch {
		case err == nil:
			n++
		case ctx.Err() != nil:
			return n, ctx.Err()
		case berth.IsCode(err, berth.EInternal) || berth.IsCode(err, berth.ENotFound):
			// Damaged, or a blob of it lost: the others may be whole.
			if passed == nil {
				passed = err
			}
		default:
			return n, err
		}
	}
	return n, passed
}

// storedCheckpoints lists the ids of the session's checkpoints in the
// store, oldest first (checkpoint ids are ULIDs: they sort by time), less
// those its node had pruned by its last state.json.
func storedCheckpoints(ctx context.Context, c *Client, sessionID string) ([]string, error) {
	var out []string
	err := c.List(ctx, SessionKey(sessionID)+"checkpoints/", func(key string, _ int64) error {
		if id, ok := cutCheckpointKey(key); ok && key == CheckpointKey(sessionID, id) {
			out = append(out, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	st, err := ReadState(ctx, c, sessionID)
	if berth.IsCode(err, berth.ENotFound) {
		// No state yet: a sync that wrote checkpoints and no state.json.
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	named, newest := map[string]bool{}, ""
	for _, id := range st.Checkpoints {
		named[id] = true
		newest = max(newest, id)
	}
	// Those written after the state (a sync cut short) are kept.
	return slices.DeleteFunc(out, func(id string) bool { return !named[id] && id < newest }), nil
}

// restoreCheckpoint imports the session's checkpoint read from the store,
// each blob from near where it has it, else from the pack the checkpoint
// names for it (a file the workspace's walk packed), else as a blob.
func restoreCheckpoint(ctx context.Context, c *Client, cs *checkpoint.Store, tree, sessionID string, read *resolvedCheckpoint, near checkpoint.BlobSource) error {
	id := read.id
	files := slices.SortedFunc(maps.Values(read.files), func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	entries := make([]checkpoint.Entry, len(files))
	packed := map[string]File{}
	for i, f := range files {
		entries[i] = checkpoint.Entry{Path: f.Path, Kind: f.Kind, Mode: f.Mode, Size: f.Size, Hash: f.SHA256, Target: f.Target}
		if f.Pack != "" {
			packed[f.SHA256] = f
		}
	}
	// Import checks every blob's bytes against its hash, wherever read.
	blob := func(ctx context.Context, hash string, size int64) (io.ReadCloser, error) {
		if !checkpoint.ValidHash(hash) {
			return nil, berth.Errorf(berth.EInternal, "object store: a checkpoint names a bad hash")
		}
		if near != nil {
			if r, err := near(ctx, hash, size); err == nil {
				return r, nil
			}
		}
		if f, ok := packed[hash]; ok {
			if f.Size != size || checkPacked(f) != nil {
				return nil, berth.Errorf(berth.EInternal, "object store: checkpoint %s of session %s names a bad place in a pack", id, sessionID)
			}
			return c.GetRange(ctx, PackKey(f.Pack), f.Offset, f.Size)
		}
		r, _, err := c.Get(ctx, BlobKey(hash))
		return r, err
	}
	return cs.ImportIn(ctx, tree, sessionID, read.meta, entries, blob)
}

// NearBlobs is a checkpoint.BlobSource over the files of t restored into
// dir (by Restore, before anything else wrote there): a blob is read from
// a regular file of t with its hash and size, opened without following a
// link (Import checks what it reads against the hash all the same). close
// releases it.
func NearBlobs(dir string, t *Tree) (src checkpoint.BlobSource, close func()) {
	if t == nil {
		return nil, func() {}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, func() {}
	}
	byHash := make(map[string]File, len(t.Files))
	for _, f := range t.Files {
		if f.Kind == checkpoint.KindFile && f.SHA256 != "" {
			byHash[f.SHA256] = f
		}
	}
	src = func(_ context.Context, hash string, size int64) (io.ReadCloser, error) {
		f, ok := byHash[hash]
		if !ok || f.Size != size {
			return nil, berth.Errorf(berth.ENotFound, "no restored file holds the blob")
		}
		return root.OpenFile(f.Path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	}
	return src, func() { _ = root.Close() }
}
