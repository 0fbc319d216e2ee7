package checkpoint

import (
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
)

// Pruned is a checkpoint Prune removed.
type Pruned struct {
	SessionID    string
	CheckpointID string
	// TurnID is the turn the checkpoint was taken before.
	TurnID string
	// FreedBytes is how much the tree's bytes fell: the checkpoint's own
	// files and the blobs no other checkpoint of the tree names, less what
	// the manifests that were deltas on it grew, written whole.
	// RemovedBytes is what left the disk: less when another tree's
	// checkpoints name some of those blobs. Both count files as the tree
	// does (index.go).
	FreedBytes   int64
	RemovedBytes int64
	// TreeBytes is the tree's bytes after.
	TreeBytes int64
}

// maxStale bounds the rounds of a Prune that find their checkpoint gone
// (another Prune of the tree took it first).
const maxStale = 3

// Prune removes the oldest checkpoints of tree (a root session's id), one
// after another, while what its checkpoints take on disk (index.go) is
// over Options.MaxTreeBytes, and returns them oldest first. Only the tree's
// own checkpoints go, never another tree's, and a blob goes only when no
// checkpoint of any tree names it. The tree's newest checkpoint always
// stays, however large, and so does each checkpoint pinned names (the one
// a turn still in flight can be rewound to) and the session's newer ones:
// a session whose oldest checkpoint is pinned is passed over.
func (s *Store) Prune(tree string, pinned map[string]bool) ([]Pruned, error) {
	if !ids.ValidName(tree) {
		return nil, berth.Errorf(berth.EInvalid, "invalid session id")
	}
	if err := s.ensureIndex(); err != nil {
		return nil, err
	}
	var out []Pruned
	for stale := 0; stale < maxStale; {
		c, ok := s.pruneCandidate(tree, pinned)
		if !ok {
			break
		}
		p, err := s.pruneOne(tree, c, pinned)
		if err != nil {
			return out, err
		}
		if p == nil {
			stale++
			continue
		}
		out = append(out, *p)
	}
	return out, nil
}

// OverBudget reports whether tree's checkpoints may be past the tree's
// bytes (true while the store has not counted them yet): a caller skips
// the work of a Prune's pinned set when it is false.
func (s *Store) OverBudget(tree string) bool {
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	if s.ix == nil {
		return true
	}
	t := s.ix.trees[tree]
	return t != nil && t.bytes > s.opts.MaxTreeBytes
}

// candidate is the checkpoint a Prune removes next.
type candidate struct{ session, id string }

// pruneCandidate returns the tree's oldest checkpoint while the tree is
// over its bytes and that is not its newest.
func (s *Store) pruneCandidate(tree string, pinned map[string]bool) (candidate, bool) {
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	return s.candidateLocked(tree, pinned)
}

// candidateLocked is pruneCandidate under ixMu. ULIDs sort by time.
func (s *Store) candidateLocked(tree string, pinned map[string]bool) (candidate, bool) {
	if s.ix == nil {
		return candidate{}, false
	}
	t := s.ix.trees[tree]
	if t == nil || t.bytes <= s.opts.MaxTreeBytes {
		return candidate{}, false
	}
	var oldest candidate
	newest := ""
	for _, ses := range t.sessions {
		if len(ses.ckpts) == 0 {
			continue
		}
		newest = max(newest, ses.ckpts[len(ses.ckpts)-1].id)
		if first := ses.ckpts[0].id; !pinned[first] && (oldest.id == "" || first < oldest.id) {
			oldest = candidate{ses.id, first}
		}
	}
	if oldest.id == "" || oldest.id == newest {
		return candidate{}, false
	}
	return oldest, true
}

// pruneOne removes checkpoint c, then the blobs only it named; nil when c
// is no longer the one to remove.
func (s *Store) pruneOne(tree string, c candidate, pinned map[string]bool) (*Pruned, error) {
	unlock := s.lockSession(c.session)
	s.gc.RLock()
	p, ix, dead, err := s.removeOldest(tree, c, pinned)
	s.gc.RUnlock()
	unlock()
	if err != nil || p == nil {
		return nil, err
	}
	p.RemovedBytes += s.free(ix, dead)
	return p, nil
}

// removeOldest removes c, the oldest checkpoint of its session, from disk
// and from the index, and returns it, the index and the blobs no tree
// names any more. The session's checkpoints whose manifests are deltas on
// c's (the next one, if any) are written whole first; then c is unlisted
// (its metadata removed), then its manifest goes: a crash anywhere leaves
// every listed checkpoint whole, and the next sweep removes what is left
// of c. The caller holds the session's lock and gc shared.
func (s *Store) removeOldest(tree string, c candidate, pinned map[string]bool) (*Pruned, *index, []run, error) {
	r := s.planRemoval(tree, c, pinned)
	if r == nil {
		return nil, nil, nil, nil
	}
	meta, err := s.readMeta(c.session, c.id)
	if err != nil {
		return nil, nil, nil, r.fail(err)
	}
	if err := r.readManifests(); err != nil {
		return nil, nil, nil, err
	}
	if err := r.writeDeltasWhole(); err != nil {
		return nil, nil, nil, err
	}
	if err := r.unlist(); err != nil {
		return nil, nil, nil, err
	}
	ended, err := r.endedRuns()
	if err != nil {
		return nil, nil, nil, err
	}
	p := &Pruned{SessionID: c.session, CheckpointID: c.id, TurnID: meta.TurnID}
	ix, dead := r.unindex(p, ended)
	return p, ix, dead, nil
}

// removal is one checkpoint removeOldest removes, as the index had it when
// the removal began, and what the removal learns on its way.
type removal struct {
	s  *Store
	c  candidate
	ix *index
	ck ixCheckpoint
	// next is the session's checkpoint after c (nil when c is its newest);
	// deltas are the later checkpoints whose manifests are deltas on c:
	// the next one, but for a commit that failed after its metadata.
	next   *ixCheckpoint
	deltas []ixCheckpoint
	// old and after are the manifests of c and next (nil when damaged or
	// none).
	old, after *manifest
	// grown is what the deltas on c, written whole, add, by checkpoint.
	grown map[string]int64
}

// planRemoval reads from the index what removing c touches; nil when c is
// no longer the one to remove.
func (s *Store) planRemoval(tree string, c candidate, pinned map[string]bool) *removal {
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	if cur, ok := s.candidateLocked(tree, pinned); !ok || cur != c {
		return nil
	}
	r := &removal{s: s, c: c, ix: s.ix, grown: map[string]int64{}}
	ses := r.ix.sessions[c.session]
	if r.ck = ses.ckpts[0]; len(ses.ckpts) > 1 {
		n := ses.ckpts[1]
		r.next = &n
	}
	for _, d := range ses.ckpts[1:] {
		if d.base == c.id && !d.damaged {
			r.deltas = append(r.deltas, d)
		}
	}
	return r
}

// fail drops the index, which no longer says what the disk holds (the
// next use builds it again), and returns err.
func (r *removal) fail(err error) error {
	r.s.invalidate(r.ix)
	return err
}

// readManifests reads the manifests of c and of the checkpoint after it,
// those that are not damaged.
func (r *removal) readManifests() error {
	var err error
	if !r.ck.damaged {
		if r.old, err = r.s.readManifest(r.c.session, r.c.id); err != nil {
			return r.fail(err)
		}
	}
	if r.next != nil && !r.next.damaged {
		if r.after, err = r.s.readManifest(r.c.session, r.next.id); err != nil {
			return r.fail(err)
		}
	}
	return nil
}

// writeDeltasWhole writes the manifests that are deltas on c whole, and
// records by how much each grew.
func (r *removal) writeDeltasWhole() error {
	s, c := r.s, r.c
	for _, d := range r.deltas {
		m := r.after
		if d.id != r.next.id {
			var err error
			if m, err = s.readManifest(c.session, d.id); err != nil {
				return r.fail(err)
			}
		}
		whole := encodeManifest("", m.entries)
		if err := atomicfile.WriteFile(s.entriesPath(c.session, d.id), whole); err != nil {
			return berth.WrapError(berth.EInternal, err, "cannot prune checkpoint")
		}
		fi, err := os.Stat(s.metaPath(c.session, d.id))
		if err != nil {
			return r.fail(err)
		}
		r.grown[d.id] = footprint(int64(len(whole))) + footprint(fi.Size()) - d.bytes
	}
	return nil
}

// unlist takes c off the disk: once the manifests written whole are there
// by name, the pruned mark, then its metadata (what lists it), then its
// manifest.
func (r *removal) unlist() error {
	s, c := r.s, r.c
	dir := s.sessionDir(c.session)
	if len(r.deltas) > 0 {
		// The manifests written whole are on disk by name before c is
		// unlisted: a filesystem that reorders renames and unlinks across
		// a crash could otherwise keep a delta on a checkpoint gone.
		if err := atomicfile.SyncDir(filepath.Dir(s.entriesPath(c.session, r.deltas[0].id))); err != nil {
			return r.fail(berth.WrapError(berth.EInternal, err, "cannot prune checkpoint"))
		}
	}
	// What a rewind to c answers from now on (notFound).
	if err := atomicfile.WriteFile(filepath.Join(dir, prunedFile), []byte(c.id)); err != nil {
		return r.fail(berth.WrapError(berth.EInternal, err, "cannot prune checkpoint"))
	}
	if err := os.Remove(s.metaPath(c.session, c.id)); err != nil {
		return r.fail(berth.WrapError(berth.EInternal, err, "cannot prune checkpoint"))
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return r.fail(berth.WrapError(berth.EInternal, err, "cannot prune checkpoint"))
	}
	_ = os.Remove(s.entriesPath(c.session, c.id))
	if r.next == nil {
		// It was the session's newest: its next checkpoint reads every
		// file again, and is a manifest of its own.
		s.mu.Lock()
		delete(s.last, c.session)
		s.mu.Unlock()
	}
	return nil
}

// endedRuns are the blob runs c's manifest names and the next one's does
// not.
func (r *removal) endedRuns() ([]run, error) {
	if r.old == nil {
		return nil, nil
	}
	var nextByPath map[string]*Entry
	if r.after != nil {
		nextByPath = r.after.byPath
	}
	ended, err := runsOf(r.old.entries, nextByPath)
	if err != nil {
		return nil, r.fail(err)
	}
	return ended, nil
}

// unindex takes c out of the index, counts the deltas on it at their
// whole size, and fills in p's bytes; it returns the index and the blobs
// no tree names any more (none when the index was dropped meanwhile: the
// sweep that builds the next one removes what nothing names).
func (r *removal) unindex(p *Pruned, ended []run) (*index, []run) {
	s, c, ix := r.s, r.c, r.ix
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	if s.ix != ix {
		return nil, nil
	}
	ses := ix.sessions[c.session]
	freed, dead, err := ix.end(ses.tree, ended)
	if err != nil {
		s.ix = nil
		return nil, nil
	}
	ses.ckpts = ses.ckpts[1:]
	var more int64
	for i := range ses.ckpts {
		if d := &ses.ckpts[i]; d.base == c.id && !d.damaged {
			d.base, d.bytes = "", d.bytes+r.grown[d.id]
			more += r.grown[d.id]
		}
	}
	ses.tree.bytes += more - r.ck.bytes
	if len(ses.ckpts) == 0 {
		ix.forget(ses)
	}
	// Its own files are freed and removed too; the deltas on it grew.
	p.FreedBytes, p.RemovedBytes, p.TreeBytes = freed+r.ck.bytes-more, r.ck.bytes-more, ses.tree.bytes
	return ix, dead
}

// free removes the blobs dead that no tree of ix names any more, once no
// create, restore or prune holds gc, and returns their bytes. A blob a
// create named again meanwhile stays; an index dropped meanwhile removes
// nothing (the sweep that builds the next one does).
func (s *Store) free(ix *index, dead []run) int64 {
	if ix == nil || len(dead) == 0 {
		return 0
	}
	s.lockGC()
	defer s.gc.Unlock()
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	if s.ix != ix {
		return 0
	}
	var n int64
	for _, r := range dead {
		if ix.blobs[r.k] > 0 {
			continue
		}
		if os.Remove(s.blobPath(r.k.String())) == nil {
			n += r.size
		}
	}
	return n
}

// notFound is the error for checkpoint id that the session does not
// have: pruned, when it is no newer than the last one pruned.
func (s *Store) notFound(sessionID, id string) error {
	b, err := os.ReadFile(filepath.Join(s.sessionDir(sessionID), prunedFile))
	if err == nil && ids.Valid(idPrefix, string(b)) && id <= string(b) {
		return berth.Errorf(berth.ENotFound, "checkpoint %s was pruned: the checkpoints of its session's tree went over [checkpoints] max_tree_bytes, and the oldest were removed", id)
	}
	return berth.Errorf(berth.ENotFound, "no checkpoint %s", id)
}
