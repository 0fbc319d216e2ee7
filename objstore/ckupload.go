package objstore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
)

// maxStoredChain bounds the deltas between two whole checkpoints in the
// store: a restore reads at most this many more to resolve one.
const maxStoredChain = 32

// PutCheckpoint is a checkpoint of a session as Checkpoint put it, kept
// by its caller (the Syncer) for the session's next: that one is put as
// the changes since.
type PutCheckpoint struct {
	id string
	// depth is how many deltas lie between it and a whole one in the
	// store.
	depth int
	// files are its files as put, by path; read is its entries as the
	// local store resolved them.
	files map[string]File
	read  *checkpoint.Resolved
}

// Checkpoint puts the session's checkpoint ckpt from the local store cs:
// its blobs not in the object store yet, then its metadata and manifest.
// A file whose content a pack of the store holds (the workspace's walk
// packed it) names that pack rather than a blob of its own. prev is the
// session's checkpoint put before it (nil: none): ckpt is put as its
// changes since prev (a delta, at most maxStoredChain deep), and read
// from the local store as such (checkpoint.Store.ChangesAfter). It
// returns ckpt's for the next call, which takes it over: prev is not
// valid after a call, even one that fails. A checkpoint pruned meanwhile
// is ENotFound.
func (u *Uploader) Checkpoint(ctx context.Context, cs *checkpoint.Store, sessionID, ckpt string, prev *PutCheckpoint) (*PutCheckpoint, error) {
	var known *checkpoint.Resolved
	if prev != nil {
		known = prev.read
	}
	ch, read, err := cs.ChangesAfter(sessionID, ckpt, known)
	if err != nil {
		return nil, err
	}
	put := &PutCheckpoint{id: ckpt, read: read}
	changed := ch.Changed
	if ch.Whole != nil || prev == nil {
		changed = ch.Whole
		put.files = make(map[string]File, len(changed))
	} else {
		// Taken over: the files of prev, changed as ckpt changes them.
		put.files, prev.files = prev.files, nil
		for _, p := range ch.Removed {
			delete(put.files, p)
		}
	}
	files := make([]File, 0, len(changed))
	for _, e := range changed {
		f := fileOf(e)
		if e.Kind == checkpoint.KindFile {
			if pack, off, ok := u.packed(e.Hash); ok {
				f.Pack, f.Offset = pack, off
			} else if err := u.putLocalBlob(ctx, cs, e.Hash, e.Size); err != nil {
				return nil, err
			}
		}
		files = append(files, f)
		put.files[f.Path] = f
	}
	var stored StoredCheckpoint
	switch {
	case prev == nil || prev.depth >= maxStoredChain:
		stored = StoredCheckpoint{Checkpoint: ch.Meta, Files: sortedFiles(put.files)}
	case ch.Whole != nil:
		// Read whole (its chain does not pass through prev): the changes
		// since prev are found by comparing.
		put.depth = prev.depth + 1
		stored = StoredCheckpoint{Delta: deltaOf(ch.Meta, prev, put.files)}
	default:
		put.depth = prev.depth + 1
		stored = StoredCheckpoint{Delta: &CheckpointDelta{Checkpoint: ch.Meta, Base: prev.id, Files: files, Removed: ch.Removed}}
	}
	if err := u.c.putJSON(ctx, CheckpointKey(sessionID, ckpt), stored); err != nil {
		return nil, err
	}
	return put, nil
}

// sortedFiles is files sorted by path.
func sortedFiles(files map[string]File) []File {
	return slices.SortedFunc(maps.Values(files), func(a, b File) int { return strings.Compare(a.Path, b.Path) })
}

// deltaOf is the checkpoint meta whose files are files as the changes
// since prev: the paths added or changed, and those removed, by path.
func deltaOf(meta *checkpoint.Checkpoint, prev *PutCheckpoint, files map[string]File) *CheckpointDelta {
	d := &CheckpointDelta{Checkpoint: meta, Base: prev.id, Files: []File{}}
	for p, f := range files {
		if old, ok := prev.files[p]; !ok || old != f {
			d.Files = append(d.Files, f)
		}
	}
	for p := range prev.files {
		if _, ok := files[p]; !ok {
			d.Removed = append(d.Removed, p)
		}
	}
	slices.SortFunc(d.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	slices.Sort(d.Removed)
	return d
}

// maxResolve bounds the checkpoints a restore reads to resolve one: past
// maxStoredChain, so a store whose bases loop cannot loop it.
const maxResolve = 2 * maxStoredChain

// resolvedCheckpoint is a checkpoint read back from the store, its deltas
// resolved: its metadata and its files by path.
type resolvedCheckpoint struct {
	id    string
	meta  *checkpoint.Checkpoint
	files map[string]File
}

// readCheckpoint reads the session's checkpoint id from the store, whole:
// a delta is resolved on last (the checkpoint read before, nil: none)
// when it is its base, else on its bases read from the store. EInternal
// when it or a base is damaged, ENotFound when one is missing.
func readCheckpoint(ctx context.Context, c *Client, sessionID, id string, last *resolvedCheckpoint) (*resolvedCheckpoint, error) {
	base, chain, err := readChain(ctx, c, sessionID, id, last)
	if err != nil {
		return nil, err
	}
	out := base
	if len(chain) > 0 {
		out = &resolvedCheckpoint{files: maps.Clone(base.files)}
		// The deltas apply oldest first: the chain was read newest first.
		for _, d := range slices.Backward(chain) {
			for _, p := range d.Removed {
				delete(out.files, p)
			}
			for _, f := range d.Files {
				out.files[f.Path] = f
			}
			out.id, out.meta = d.Checkpoint.ID, d.Checkpoint
		}
	}
	if out.id != id {
		return nil, damagedCheckpoint(sessionID, id)
	}
	return out, nil
}

// readChain reads checkpoint id's deltas, newest first, down to its base:
// last when the chain reaches it, else a whole checkpoint read from the
// store.
func readChain(ctx context.Context, c *Client, sessionID, id string, last *resolvedCheckpoint) (*resolvedCheckpoint, []*CheckpointDelta, error) {
	var chain []*CheckpointDelta
	for at := id; ; {
		if last != nil && last.id == at && len(chain) > 0 {
			return last, chain, nil
		}
		if len(chain) > maxResolve {
			return nil, nil, berth.Errorf(berth.EInternal, "object store: checkpoint %s of session %s has a broken chain", id, sessionID)
		}
		var stored StoredCheckpoint
		if err := c.getJSON(ctx, CheckpointKey(sessionID, at), &stored); err != nil {
			return nil, nil, err
		}
		if stored.Delta == nil {
			base, err := wholeCheckpoint(sessionID, at, &stored)
			return base, chain, err
		}
		d := stored.Delta
		if d.Checkpoint == nil || d.Checkpoint.ID != at || d.Base == "" || stored.Checkpoint != nil || stored.Files != nil {
			return nil, nil, damagedCheckpoint(sessionID, at)
		}
		chain = append(chain, d)
		at = d.Base
	}
}

// wholeCheckpoint is stored, the whole checkpoint id, by path.
func wholeCheckpoint(sessionID, id string, stored *StoredCheckpoint) (*resolvedCheckpoint, error) {
	if stored.Checkpoint == nil || stored.Checkpoint.ID != id {
		return nil, damagedCheckpoint(sessionID, id)
	}
	out := &resolvedCheckpoint{id: id, meta: stored.Checkpoint, files: make(map[string]File, len(stored.Files))}
	for _, f := range stored.Files {
		if _, dup := out.files[f.Path]; dup {
			return nil, damagedCheckpoint(sessionID, id)
		}
		out.files[f.Path] = f
	}
	return out, nil
}

// damagedCheckpoint is the error of a checkpoint the store holds that
// berth did not write so.
func damagedCheckpoint(sessionID, id string) error {
	return berth.WrapError(berth.EInternal, errors.New("damaged"), "object store: checkpoint %s of session %s is damaged", id, sessionID)
}

// putLocalBlob puts the blob of hash from the checkpoint store unless the
// object store has it.
func (u *Uploader) putLocalBlob(ctx context.Context, cs *checkpoint.Store, hash string, size int64) error {
	ok, err := u.have(ctx, hash)
	if err != nil || ok {
		return err
	}
	f, err := cs.OpenBlob(hash)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot read a checkpoint blob")
	}
	if fi.Size() != size {
		return berth.WrapError(berth.EInternal, errors.New("size differs"), "checkpoint blob %s is damaged", hash[:12])
	}
	return u.putBlob(ctx, hash, f, size)
}
