package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
	"golang.org/x/sys/unix"
)

// fileKey is a file's identity on disk.
type fileKey struct{ dev, ino uint64 }

// creator records one checkpoint.
type creator struct {
	s *Store
	// prevManifest is the session's newest manifest the walk compared
	// with (nil: none), prev its entries by path.
	prevManifest *manifest
	prev         map[string]*Entry
	// byInode remembers the hash of each inode read in this walk: a
	// workspace of hard links reads each file once.
	byInode map[fileKey]string
	entries []Entry
	// pending are blobs written to temporary names, renamed into place
	// once all are synced.
	pending []pendingBlob
	files   int
	bytes   int64
}

// pendingBlob is a new blob waiting for its rename.
type pendingBlob struct{ tmp, hash string }

// Create records the workspace of sessionID, a tree of its own, as the
// checkpoint taken before turnID: Capture, then Commit.
func (s *Store) Create(ctx context.Context, sessionID, turnID, workspace string, hide ...string) (*Checkpoint, error) {
	return s.CreateIn(ctx, sessionID, sessionID, turnID, workspace, hide...)
}

// CreateIn is Create for a session of the tree whose root is tree.
func (s *Store) CreateIn(ctx context.Context, tree, sessionID, turnID, workspace string, hide ...string) (*Checkpoint, error) {
	p, err := s.CaptureIn(ctx, tree, sessionID, turnID, workspace, hide...)
	if err != nil {
		return nil, err
	}
	return p.Commit()
}

// Pending is a captured checkpoint not yet on disk: its changed files'
// contents are copied (to temporary blobs), so the workspace may change.
// Exactly one of Commit and Abort must follow; until then the session's
// next Capture, and its List, Get, Restore and Delete, wait.
type Pending struct {
	s *Store
	// tree is the tree the checkpoint counts in (its root session's id).
	tree   string
	c      *creator
	w      *walker
	prev   *manifest
	meta   *Checkpoint
	unlock func()
	done   bool
}

// Capture reads the workspace of sessionID, a tree of its own, as it is
// before turnID: the walk, and the contents of the files the session's
// previous checkpoint did not record with the same size, times, inode and
// device. What it leaves out is listed; nothing it meets fails it except
// the store itself or the workspace going away (ENotFound). The
// checkpoint's id is known from here on (Pending.Checkpoint); Commit makes
// it durable and listed.
func (s *Store) Capture(ctx context.Context, sessionID, turnID, workspace string, hide ...string) (*Pending, error) {
	return s.CaptureIn(ctx, sessionID, sessionID, turnID, workspace, hide...)
}

// CaptureIn is Capture for a session of the tree whose root is tree: its
// checkpoints count against the tree's Options.MaxTreeBytes (see Prune).
// A session's tree is the one its first checkpoint gave.
func (s *Store) CaptureIn(ctx context.Context, tree, sessionID, turnID, workspace string, hide ...string) (*Pending, error) {
	root, err := s.openFor(tree, sessionID, workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	unlockSession := s.lockSession(sessionID)
	// No sweep runs from the first blob to the manifest naming it.
	s.gc.RLock()
	p := &Pending{s: s, tree: tree, unlock: func() { s.gc.RUnlock(); unlockSession() }}
	c, w, meta, err := s.walkInto(ctx, root, sessionID, turnID, hide, nil)
	if err != nil {
		p.Abort()
		return nil, err
	}
	p.c, p.w, p.prev, p.meta = c, w, c.prevManifest, meta
	return p, nil
}

// openFor checks the ids of a capture of sessionID in tree, opens its
// workspace and makes the store's directories it writes to.
func (s *Store) openFor(tree, sessionID, workspace string) (*os.Root, error) {
	if !ids.ValidName(sessionID) || !ids.ValidName(tree) {
		return nil, berth.Errorf(berth.EInvalid, "invalid session id")
	}
	for _, d := range []string{s.blobDir(), s.sessionDir(sessionID)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, berth.WrapError(berth.EInternal, err, "cannot create checkpoint directory")
		}
	}
	return openWorkspace(workspace)
}

// walkInto walks the open workspace root for a checkpoint of sessionID
// before turnID against the session's previous manifest: the creator
// holds the entries and the temporary blobs of the files read, the
// walker the skips and .gitignore signatures. hook, when set, adjusts
// the walker first (a warm capture's watch).
func (s *Store) walkInto(ctx context.Context, root *os.Root, sessionID, turnID string, hide []string, hook func(*walker)) (*creator, *walker, *Checkpoint, error) {
	c := &creator{s: s, byInode: map[fileKey]string{}}
	prev := s.previous(sessionID)
	c.prevManifest = prev
	if prev != nil {
		c.prev = prev.byPath
		c.entries = make([]Entry, 0, len(prev.entries)+16)
	}
	meta := &Checkpoint{SessionID: sessionID,
		Checkpoint: berth.Checkpoint{ID: ids.New(idPrefix), TurnID: turnID, CreatedAt: time.Now().UTC()}}
	w := &walker{ctx: ctx, root: root, opts: s.opts, fn: c.visit, sigs: map[string]string{}}
	if prev != nil {
		w.prevSigs, w.known = prev.sigs, func(p string) bool { return c.prev[p] != nil }
	}
	for _, h := range hide {
		if fi, err := os.Stat(h); err == nil {
			w.hide = append(w.hide, fi)
		}
	}
	if hook != nil {
		hook(w)
	}
	if err := w.walkDir(root, ".", ""); err != nil {
		c.discard()
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		return nil, nil, nil, berth.WrapError(berth.EInternal, err, "cannot read the workspace")
	}
	meta.Files, meta.Bytes, meta.Skipped, meta.SkippedTotal = c.files, c.bytes, w.skipped, w.skipN
	if meta.Skipped == nil {
		meta.Skipped = []Skip{}
	}
	return c, w, meta, nil
}

// Checkpoint describes the captured checkpoint (listed once committed).
func (p *Pending) Checkpoint() *Checkpoint { return p.meta }

// Abort drops a capture that will not be committed.
func (p *Pending) Abort() {
	if p.done {
		return
	}
	p.done = true
	if p.c != nil {
		p.c.discard()
	}
	p.unlock()
}

// Commit makes the captured checkpoint durable: its new blobs synced and
// renamed into place, then its manifest, then its metadata; then counts
// it in its tree. On an error nothing is listed. It does not prune: the
// caller runs Prune for the tree.
//
// Commits are grouped: one that arrives while another writes waits, and
// the next writer takes every commit waiting, their files synced
// together (one syncfs for more than two) and each session's directory
// once. Fifty commits at once were fifty rounds of three fsyncs, one
// after another, beside the agents' first words on two cores.
func (p *Pending) Commit() (*Checkpoint, error) {
	if p.done {
		return nil, berth.Errorf(berth.EInternal, "checkpoint already committed")
	}
	defer p.Abort()
	s := p.s
	req := &commitReq{p: p}
	s.commitQMu.Lock()
	s.commitQ = append(s.commitQ, req)
	s.commitQMu.Unlock()
	// Whoever holds commitMu next writes every commit queued by then,
	// this one included (or a writer before it did).
	s.writeQueued()
	if req.err != nil {
		return nil, req.err
	}
	return p.meta, nil
}

// writeQueued takes commitMu and writes every commit queued, as a group.
func (s *Store) writeQueued() {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.commitQMu.Lock()
	batch := s.commitQ
	s.commitQ = nil
	s.commitQMu.Unlock()
	if len(batch) > 0 {
		s.commitBatch(batch)
	}
}

// commitReq is one Pending's part of a group commit, and its outcome.
type commitReq struct {
	p                 *Pending
	entries, metaFile *atomicfile.Temp
	// disk is what its two files take on disk; chain how deep its
	// manifest is in a chain of deltas.
	disk  int64
	chain int
	err   error
}

// fail records err as the request's outcome (the first only) and drops
// its temporary files.
func (r *commitReq) fail(err error, what string) {
	if r.err == nil {
		r.err = berth.WrapError(berth.EInternal, err, "%s", what)
	}
	if r.entries != nil {
		r.entries.Discard()
	}
	if r.metaFile != nil {
		r.metaFile.Discard()
	}
}

// commitBatch writes the commits of batch (commitMu held): each one's
// blobs and temporary files, then all synced, then each placed, then
// each session's directory synced. Each request's err says how its own
// went; one failing does not fail the others.
func (s *Store) commitBatch(batch []*commitReq) {
	s.commitGroups.Add(1)
	var temps []*atomicfile.Temp
	for _, r := range batch {
		p, c, meta := r.p, r.p.c, r.p.meta
		if err := c.commitBlobs(); err != nil {
			r.fail(err, "cannot write checkpoint blobs")
			continue
		}
		tree, err := s.joinTree(meta.SessionID, p.tree)
		if err != nil {
			r.fail(err, "cannot write checkpoint")
			continue
		}
		p.tree = tree
		var buf []byte
		buf, r.chain = c.encode(p.prev)
		mb, _ := json.Marshal(meta)
		r.disk = footprint(int64(len(buf))) + footprint(int64(len(mb)))
		if r.entries, err = atomicfile.Create(s.entriesPath(meta.SessionID, meta.ID), buf); err != nil {
			r.fail(err, "cannot write checkpoint")
			continue
		}
		if r.metaFile, err = atomicfile.Create(s.metaPath(meta.SessionID, meta.ID), mb); err != nil {
			r.fail(err, "cannot write checkpoint")
			continue
		}
		temps = append(temps, r.entries, r.metaFile)
	}
	// Every file synced before any is renamed: the manifest is in place
	// before the metadata that lists the checkpoint.
	if err := atomicfile.SyncAll(temps, s.dir); err != nil {
		for _, r := range batch {
			r.fail(err, "cannot write checkpoint")
		}
		return
	}
	dirs := map[string][]*commitReq{}
	for _, r := range batch {
		if r.err != nil {
			continue
		}
		meta := r.p.meta
		if err := r.entries.Place(); err != nil {
			r.fail(err, "cannot write checkpoint")
			continue
		}
		if err := r.metaFile.Place(); err != nil {
			_ = os.Remove(s.entriesPath(meta.SessionID, meta.ID))
			r.fail(err, "cannot write checkpoint")
			continue
		}
		dir := s.sessionDir(meta.SessionID)
		dirs[dir] = append(dirs[dir], r)
	}
	for dir, rs := range dirs {
		if err := atomicfile.SyncDir(dir); err != nil {
			// Listed, yet not counted: counted again from disk.
			s.ixMu.Lock()
			s.ix = nil
			s.ixMu.Unlock()
			for _, r := range rs {
				r.fail(err, "cannot write checkpoint")
			}
			continue
		}
		for _, r := range rs {
			s.committed(r)
		}
	}
}

// committed makes a written checkpoint the session's last and counts it
// in its tree.
func (s *Store) committed(r *commitReq) {
	p, c, meta := r.p, r.p.c, r.p.meta
	m := &manifest{meta: meta, entries: c.entries, byPath: make(map[string]*Entry, len(c.entries)), chain: r.chain, sigs: p.w.sigs}
	for i := range m.entries {
		m.byPath[m.entries[i].Path] = &m.entries[i]
	}
	s.mu.Lock()
	s.last[meta.SessionID] = m
	s.mu.Unlock()
	base := ""
	if r.chain > 0 {
		base = p.prev.meta.ID
	}
	s.register(p, base, r.disk)
}

// encode writes the manifest: only what changed since prev (a delta on
// it) while the chain of deltas is short and the change small, else every
// entry. It returns the file and how deep in a chain of deltas it is.
func (c *creator) encode(prev *manifest) ([]byte, int) {
	if prev != nil && prev.chain < maxChain {
		var changed []Entry
		seen := make(map[string]bool, len(c.entries))
		for i := range c.entries {
			e := &c.entries[i]
			seen[e.Path] = true
			if p := prev.byPath[e.Path]; p == nil || *p != *e {
				changed = append(changed, *e)
			}
		}
		for i := range prev.entries {
			if p := prev.entries[i].Path; !seen[p] {
				changed = append(changed, Entry{Path: p, Kind: kindRemoved})
			}
		}
		if len(changed) <= len(c.entries)/2 {
			return encodeManifest(prev.meta.ID, changed), prev.chain + 1
		}
	}
	return encodeManifest("", c.entries), 0
}

// encodeManifest is a manifest file: its header, then its entries.
func encodeManifest(base string, entries []Entry) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	_ = enc.Encode(header{V: 1, Base: base})
	for i := range entries {
		_ = enc.Encode(&entries[i])
	}
	return buf.Bytes()
}

// previous returns the session's newest manifest, from memory or else
// from disk; nil when it has none (or it cannot be read: then every file
// is read again).
func (s *Store) previous(sessionID string) *manifest {
	s.mu.Lock()
	m := s.last[sessionID]
	s.mu.Unlock()
	if m != nil {
		return m
	}
	list, err := s.list(sessionID)
	if err != nil || len(list) == 0 {
		return nil
	}
	m, err = s.readManifest(sessionID, list[len(list)-1].ID)
	if err != nil {
		return nil
	}
	return m
}

// visit records one path the walker kept.
func (c *creator) visit(v *visit) (bool, string, error) {
	e := v.entry
	if e.Kind == KindFile {
		if p := c.prev[e.Path]; p != nil && p.sameStat(&e) {
			// Its blob is named by that manifest, so no sweep removed it.
			e.Hash = p.Hash
		} else if h, ok := c.byInode[fileKey{e.Dev, e.Ino}]; ok {
			e.Hash = h
		} else {
			h, reason, err := c.readFile(v)
			if err != nil || reason != "" {
				return false, reason, err
			}
			e.Hash = h
			c.byInode[fileKey{e.Dev, e.Ino}] = h
		}
		c.files++
		c.bytes += e.Size
	}
	c.entries = append(c.entries, e)
	return true, "", nil
}

// hasBlob reports whether the blob hash is on disk.
func (s *Store) hasBlob(hash string) bool {
	_, err := os.Lstat(s.blobPath(hash))
	return err == nil
}

// readFile hashes the file v names, writing its content to a temporary
// blob unless the store has it. reason says why the file is skipped
// instead (it changed while read).
func (c *creator) readFile(v *visit) (hash, reason string, err error) {
	f, fi, err := openFile(v.dir, v.name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errSwapped) {
		return "", SkipChanged, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return "", SkipUnreadable, nil
	}
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	c.s.reads.Add(1)
	if k, ok := fileKeyOf(fi); !ok || k != (fileKey{v.entry.Dev, v.entry.Ino}) || fi.Size() != v.entry.Size {
		return "", SkipChanged, nil
	}
	tmp, err := os.CreateTemp(c.s.blobDir(), tempPrefix+"*")
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	n, err := io.Copy(io.MultiWriter(h, bw), io.LimitReader(f, v.entry.Size+1))
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil || n != v.entry.Size {
		_ = os.Remove(tmp.Name())
		if err != nil {
			return "", "", err
		}
		return "", SkipChanged, nil
	}
	hash = hex.EncodeToString(h.Sum(nil))
	if c.s.hasBlob(hash) {
		_ = os.Remove(tmp.Name())
		return hash, "", nil
	}
	c.pending = append(c.pending, pendingBlob{tmp: tmp.Name(), hash: hash})
	return hash, "", nil
}

// syncEach is the most new blobs synced one by one; more are synced with
// one syncfs of the store's file system.
const syncEach = 16

// commitBlobs makes the new blobs durable, then renames them into place
// and syncs their directories: a blob's name never points at content that
// is not on disk.
func (c *creator) commitBlobs() error {
	if len(c.pending) == 0 {
		return nil
	}
	if len(c.pending) <= syncEach {
		for _, b := range c.pending {
			if err := atomicfile.Sync(b.tmp); err != nil {
				return err
			}
		}
	} else {
		d, err := os.Open(c.s.blobDir())
		if err != nil {
			return err
		}
		err = unix.Syncfs(int(d.Fd()))
		_ = d.Close()
		if err != nil {
			return err
		}
	}
	dirs := map[string]bool{}
	for _, b := range c.pending {
		dir := filepath.Dir(c.s.blobPath(b.hash))
		if !dirs[dir] {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			dirs[dir] = true
		}
		if err := os.Rename(b.tmp, c.s.blobPath(b.hash)); err != nil {
			return err
		}
	}
	c.pending = nil
	for dir := range dirs {
		if err := atomicfile.SyncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// discard removes the temporary blobs of a create that failed.
func (c *creator) discard() {
	for _, b := range c.pending {
		_ = os.Remove(b.tmp)
	}
}

// fileKeyOf returns fi's device and inode.
func fileKeyOf(fi fs.FileInfo) (fileKey, bool) {
	e := entryOf("", fi)
	return fileKey{e.Dev, e.Ino}, e.Ino != 0
}
