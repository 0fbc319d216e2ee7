package checkpoint

import (
	"encoding/hex"
	"errors"
)

// The accounting of what each tree's checkpoints take on disk (docs/api.md,
// Checkpoints: "Bounded per tree").
//
// A tree is a root session and all its children: their checkpoints count
// together against Options.MaxTreeBytes. A tree's bytes are the distinct
// blobs its checkpoints name, each counted once per tree, and their
// manifests; each file at what it takes on disk at least (its size
// rounded up to a 4 KiB block), so a million one-byte files cost what
// they cost the disk. A blob two trees name counts for both, and is
// removed only when no checkpoint of any tree names it.
//
// The index counts runs. A run is one path of one session holding the
// same content (file, hash) from one checkpoint of the session to a later
// one with nothing between that differs: it starts at the checkpoint that
// first records the content there and ends with the last that still does.
// A tree names a blob while one of its runs does. So a checkpoint adds
// only the runs of the files that changed since the session's previous
// one, and the session's oldest checkpoint, pruned, ends only the runs
// that do not go on into the checkpoint after it: no turn reads another
// session's manifests, and a scan of the disk counts the same runs from
// the deltas the manifests already are.
//
// The index lives in memory (two map entries, some 170 bytes, a distinct
// blob of each tree) and is built from the manifests on disk by the first
// operation that needs it (Sweep, which the daemon's boot runs); the
// manifests stay the only truth, so a crash loses nothing of it.

// blockBytes is what a file takes on disk at least.
const blockBytes = 4096

// footprint is what a file of n bytes takes on disk at least.
func footprint(n int64) int64 {
	return (max(n, 1) + blockBytes - 1) / blockBytes * blockBytes
}

// blobKey is a blob's SHA-256.
type blobKey [32]byte

// keyOf parses a manifest's hash.
func keyOf(hash string) (blobKey, bool) {
	var k blobKey
	if !validHash(hash) {
		return k, false
	}
	_, err := hex.Decode(k[:], []byte(hash))
	return k, err == nil
}

// String is the blob's file name.
func (k blobKey) String() string { return hex.EncodeToString(k[:]) }

// run is a run a checkpoint starts or ends: its blob, and the blob's
// footprint.
type run struct {
	k    blobKey
	size int64
}

// ixCheckpoint is one checkpoint of a session in the index.
type ixCheckpoint struct {
	id string
	// base is the checkpoint whose entries its manifest changes ("" for a
	// full manifest).
	base string
	// bytes is the footprint of its manifest and metadata files.
	bytes int64
	// damaged: its manifest could not be read when the index was built;
	// it starts no run (and the session's next checkpoint starts all its
	// own).
	damaged bool
}

// ixSession is a session's part of the index: its checkpoints, oldest
// first.
type ixSession struct {
	id    string
	tree  *ixTree
	ckpts []ixCheckpoint
}

// ixTree is one tree's part of the index.
type ixTree struct {
	id string
	// bytes is the footprint of the distinct blobs refs names and of its
	// checkpoints' files.
	bytes int64
	// refs counts the tree's runs by the blob they name.
	refs     map[blobKey]int32
	sessions map[string]*ixSession
}

// index is the store's accounting; Store.ixMu guards it.
type index struct {
	sessions map[string]*ixSession
	trees    map[string]*ixTree
	// blobs counts, by blob, the trees that name it.
	blobs map[blobKey]int32
}

func newIndex() *index {
	return &index{sessions: map[string]*ixSession{}, trees: map[string]*ixTree{}, blobs: map[blobKey]int32{}}
}

// session returns the session's part, made in tree if it has none; false
// when the index has it in another tree.
func (ix *index) session(id, tree string) (*ixSession, bool) {
	if ses := ix.sessions[id]; ses != nil {
		return ses, ses.tree.id == tree
	}
	t := ix.trees[tree]
	if t == nil {
		t = &ixTree{id: tree, refs: map[blobKey]int32{}, sessions: map[string]*ixSession{}}
		ix.trees[tree] = t
	}
	ses := &ixSession{id: id, tree: t}
	t.sessions[id] = ses
	ix.sessions[id] = ses
	return ses, true
}

// sessionOf returns the session's part; nil for none, or no index.
func (ix *index) sessionOf(id string) *ixSession {
	if ix == nil {
		return nil
	}
	return ix.sessions[id]
}

// add counts a checkpoint of the session, after its others, and the runs
// it starts.
func (ix *index) add(ses *ixSession, c ixCheckpoint, started []run) {
	t := ses.tree
	for _, r := range started {
		if t.refs[r.k] == 0 {
			t.bytes += r.size
			ix.blobs[r.k]++
		}
		t.refs[r.k]++
	}
	t.bytes += c.bytes
	ses.ckpts = append(ses.ckpts, c)
}

// errAccounting is an index that lost count: it is dropped and built
// again from the disk, and nothing is removed on its word.
var errAccounting = errors.New("checkpoint accounting lost count")

// end ends the runs of tree t; it returns the bytes the tree no longer
// holds (the blobs no other run of it names) and the blobs no tree names
// any more (they may go).
func (ix *index) end(t *ixTree, ended []run) (int64, []run, error) {
	var released int64
	var dead []run
	for _, r := range ended {
		if t.refs[r.k] <= 0 || ix.blobs[r.k] <= 0 {
			return 0, nil, errAccounting
		}
		if t.refs[r.k]--; t.refs[r.k] > 0 {
			continue
		}
		delete(t.refs, r.k)
		t.bytes -= r.size
		released += r.size
		if ix.blobs[r.k]--; ix.blobs[r.k] == 0 {
			delete(ix.blobs, r.k)
			dead = append(dead, r)
		}
	}
	return released, dead, nil
}

// forget removes a session that has no checkpoint left from the index,
// and its tree once that has no session.
func (ix *index) forget(ses *ixSession) {
	delete(ix.sessions, ses.id)
	delete(ses.tree.sessions, ses.id)
	if len(ses.tree.sessions) == 0 {
		delete(ix.trees, ses.tree.id)
	}
}

// ends reports whether the file e of a checkpoint ends its run there: the
// session's next checkpoint (next, nil when none) has another content, or
// nothing, at its path. It is also whether e starts a run after the
// session's previous checkpoint (then next is that one's entries).
func ends(e *Entry, next map[string]*Entry) bool {
	o := next[e.Path]
	return o == nil || o.Kind != KindFile || o.Hash != e.Hash
}

// runsOf returns the runs of entries that the neighbour other (the
// session's previous checkpoint for the runs they start, the next one for
// those they end) does not continue. errDamaged when an entry's hash is
// bad.
func runsOf(entries []Entry, other map[string]*Entry) ([]run, error) {
	var out []run
	for i := range entries {
		e := &entries[i]
		if e.Kind != KindFile || !ends(e, other) {
			continue
		}
		k, ok := keyOf(e.Hash)
		if !ok || e.Size < 0 {
			return nil, errDamaged
		}
		out = append(out, run{k, footprint(e.Size)})
	}
	return out, nil
}

// register counts a committed checkpoint: the runs it starts after the
// session's previous one (p.prev), and files, the footprint of its
// manifest and metadata.
func (s *Store) register(p *Pending, base string, files int64) {
	s.account(p.meta.SessionID, p.tree, p.meta.ID, p.c.entries, p.prev, base, files)
}

// account counts checkpoint id of sessionID, in tree, written with
// entries (base: the checkpoint its manifest is a delta on, "" for none)
// and files, the footprint of its manifest and metadata: the runs it
// starts after prev, the session's newest checkpoint before it (nil for
// none). The caller holds the session's lock and gc shared, so no sweep
// builds the index meanwhile: an index not built yet reads the checkpoint
// from disk. An index whose idea of the session's newest checkpoint is
// not prev, or that has one newer than id (an import of an older
// checkpoint), is dropped, to be built again.
func (s *Store) account(sessionID, tree, id string, entries []Entry, prev *manifest, base string, files int64) {
	var prevByPath map[string]*Entry
	prevID := ""
	if prev != nil {
		prevByPath, prevID = prev.byPath, prev.meta.ID
	}
	started, err := runsOf(entries, prevByPath)
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	ix := s.ix
	if ix == nil {
		return
	}
	ses, same := ix.session(sessionID, tree)
	want, last := "", ""
	if n := len(ses.ckpts); n > 0 {
		if last = ses.ckpts[n-1].id; !ses.ckpts[n-1].damaged {
			want = last
		}
	}
	if err != nil || !same || want != prevID || id <= last {
		s.ix = nil
		return
	}
	ix.add(ses, ixCheckpoint{id: id, base: base, bytes: files}, started)
}

// ensureIndex builds the index unless it is built.
func (s *Store) ensureIndex() error {
	s.ixMu.Lock()
	built := s.ix != nil
	s.ixMu.Unlock()
	if built {
		return nil
	}
	_, err := s.Sweep()
	return err
}

// invalidate drops ix, unless it was dropped already: the next operation
// that needs an index builds one from the disk.
func (s *Store) invalidate(ix *index) {
	s.ixMu.Lock()
	if s.ix == ix {
		s.ix = nil
	}
	s.ixMu.Unlock()
}
