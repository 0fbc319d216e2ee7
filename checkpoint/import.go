package checkpoint

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
)

// BlobSource opens the content of the blob of hash, size bytes long, where
// an imported checkpoint's blobs are (the object store: docs/api.md,
// "Failover with an object store"). Import calls it for several blobs at
// once, and closes what it returns.
type BlobSource func(ctx context.Context, hash string, size int64) (io.ReadCloser, error)

// OwnerUnknown is the UID and GID of an imported entry: its owner on the
// node it was taken on means nothing here. A restore gives such a path to
// the owner of the workspace it restores into.
const OwnerUnknown = -1

// importWorkers bounds the blobs an Import fetches at once (a checkpoint
// of 10,000 small files is 10,000 requests to the object store).
const importWorkers = 16

// incomingDir holds a directory per import fetching blobs.
const incomingDir = "incoming"

// Import writes checkpoint meta of sessionID, a tree of its own, taken on
// another node, with its whole manifest entries: ImportIn.
func (s *Store) Import(ctx context.Context, sessionID string, meta *Checkpoint, entries []Entry, blob BlobSource) error {
	return s.ImportIn(ctx, sessionID, sessionID, meta, entries, blob)
}

// ImportIn writes checkpoint meta of sessionID, a session of the tree
// whose root is tree, taken on another node, into the store as if it had
// been committed here: the blobs the store lacks fetched through blob
// (each checked against its size and SHA-256 while written to a temporary
// file, then synced and renamed into place), then its manifest, whole,
// then its metadata; then it counts in the session's tree (a session's
// tree is the one its first checkpoint gave). Only what a checkpoint
// holds of a path is kept of entries (kind, mode, size, hash, target):
// the stat fields of another node's files mean nothing here, and the
// owner is OwnerUnknown. entries are checked as a manifest read from disk
// is (the store they come from is not trusted): one that fails is
// EInternal and nothing is written. A checkpoint the session has already
// is left as it is (nil). The blobs are fetched before removals are held
// off, so a slow source holds up no other session's checkpoint. It does
// not prune: the caller runs Prune for the tree.
func (s *Store) ImportIn(ctx context.Context, tree, sessionID string, meta *Checkpoint, entries []Entry, blob BlobSource) error {
	if !ids.ValidName(sessionID) || !ids.ValidName(tree) {
		return berth.Errorf(berth.EInvalid, "invalid session id")
	}
	m, err := importManifest(sessionID, meta, entries)
	if err != nil {
		return err
	}
	for _, d := range []string{s.blobDir(), s.sessionDir(sessionID), filepath.Join(s.dir, incomingDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return berth.WrapError(berth.EInternal, err, "cannot create checkpoint directory")
		}
	}
	defer s.lockSession(sessionID)()
	switch _, err := os.Lstat(s.metaPath(sessionID, m.meta.ID)); {
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return berth.WrapError(berth.EInternal, err, "cannot read checkpoint")
	}
	f, err := s.newFetch(m, blob)
	if err != nil {
		return err
	}
	defer f.close()
	if err := f.fetch(ctx); err != nil {
		return err
	}
	// No sweep nor prune removes a blob from here to the manifest naming it.
	s.gc.RLock()
	defer s.gc.RUnlock()
	// One the store had may have been removed while the others came.
	if err := f.fetch(ctx); err != nil {
		return err
	}
	c := &creator{s: s}
	for hash, tmp := range f.got {
		if !s.hasBlob(hash) {
			c.pending = append(c.pending, pendingBlob{tmp: tmp, hash: hash})
		}
	}
	// The session's newest before this one, read before this one is listed.
	prev := s.previous(sessionID)
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if err := c.commitBlobs(); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot write checkpoint blobs")
	}
	if tree, err = s.joinTree(sessionID, tree); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot write checkpoint")
	}
	buf := encodeManifest("", m.entries)
	if err := atomicfile.WriteFile(s.entriesPath(sessionID, m.meta.ID), buf); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot write checkpoint")
	}
	mb, _ := json.Marshal(m.meta)
	if err := atomicfile.WriteFile(s.metaPath(sessionID, m.meta.ID), mb); err != nil {
		_ = os.Remove(s.entriesPath(sessionID, m.meta.ID))
		return berth.WrapError(berth.EInternal, err, "cannot write checkpoint")
	}
	if err := atomicfile.SyncDir(s.sessionDir(sessionID)); err != nil {
		// Listed, yet not counted: counted again from disk.
		s.ixMu.Lock()
		s.ix = nil
		s.ixMu.Unlock()
		return berth.WrapError(berth.EInternal, err, "cannot write checkpoint")
	}
	if prev == nil || prev.meta.ID < m.meta.ID {
		// The session's next checkpoint is compared with this one.
		s.mu.Lock()
		s.last[sessionID] = m
		s.mu.Unlock()
	}
	s.account(sessionID, tree, m.meta.ID, m.entries, prev, "", footprint(int64(len(buf)))+footprint(int64(len(mb))))
	return nil
}

// importManifest is the manifest of an imported checkpoint: a copy of
// meta and of what a checkpoint holds of each entry, sorted by path and
// checked. EInternal when meta or an entry is not one a store writes.
func importManifest(sessionID string, meta *Checkpoint, entries []Entry) (*manifest, error) {
	if meta == nil || !ids.Valid(idPrefix, meta.ID) || meta.SessionID != sessionID {
		return nil, berth.Errorf(berth.EInternal, "the checkpoint to import is damaged: its id or its session is wrong")
	}
	mc := *meta
	if mc.Skipped == nil {
		mc.Skipped = []Skip{}
	}
	own := make([]Entry, len(entries))
	for i, e := range entries {
		own[i] = Entry{Path: e.Path, Kind: e.Kind, Mode: e.Mode, Size: e.Size, Hash: e.Hash, Target: e.Target,
			UID: OwnerUnknown, GID: OwnerUnknown}
	}
	// A parent's path is a prefix of its children's: it sorts first.
	slices.SortFunc(own, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	byPath, err := checkEntries(mc.ID, own)
	if err != nil {
		return nil, err
	}
	return &manifest{meta: &mc, entries: own, byPath: byPath}, nil
}

// blobFetch is the blobs one import fetches, into a directory of its own
// under the store's incoming/ (which a sweep leaves alone while the
// import runs), on the store's file system.
type blobFetch struct {
	s    *Store
	id   string
	dir  string
	blob BlobSource
	// sizes are the blobs m names, with their sizes; got those fetched,
	// by hash, with their temporary files.
	sizes map[string]int64
	got   map[string]string
}

// newFetch makes the fetch of m's blobs. Two entries that name one blob
// with two sizes are EInternal.
func (s *Store) newFetch(m *manifest, blob BlobSource) (*blobFetch, error) {
	f := &blobFetch{s: s, id: m.meta.ID, blob: blob, sizes: map[string]int64{}, got: map[string]string{}}
	for i := range m.entries {
		e := &m.entries[i]
		if e.Kind != KindFile {
			continue
		}
		if n, ok := f.sizes[e.Hash]; ok && n != e.Size {
			return nil, berth.Errorf(berth.EInternal, "checkpoint %s names one blob with two sizes", f.id)
		}
		f.sizes[e.Hash] = e.Size
	}
	// Made and recorded at once: a sweep never takes it for a crash's.
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := os.MkdirTemp(filepath.Join(s.dir, incomingDir), tempPrefix+"*")
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot write checkpoint blobs")
	}
	f.dir = dir
	s.importing[filepath.Base(dir)] = true
	return f, nil
}

// close removes the fetch's directory, with what was fetched and not put
// in place.
func (f *blobFetch) close() {
	_ = os.RemoveAll(f.dir)
	f.s.mu.Lock()
	delete(f.s.importing, filepath.Base(f.dir))
	f.s.mu.Unlock()
}

// fetch writes the blobs the store lacks and the fetch has not got yet
// to temporary files, importWorkers at a time.
func (f *blobFetch) fetch(ctx context.Context) error {
	var want []string
	for hash := range f.sizes {
		if _, ok := f.got[hash]; !ok && !f.s.hasBlob(hash) {
			want = append(want, hash)
		}
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(importWorkers)
	for _, hash := range want {
		g.Go(func() error {
			tmp, err := f.fetchOne(gctx, hash)
			if err != nil {
				return err
			}
			mu.Lock()
			f.got[hash] = tmp
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

// fetchOne writes the blob of hash to a temporary file and returns its
// name; EInternal (and no file) when the content is not hash's, the
// source's error when it fails.
func (f *blobFetch) fetchOne(ctx context.Context, hash string) (string, error) {
	size := f.sizes[hash]
	r, err := f.blob(ctx, hash, size)
	if err != nil {
		return "", err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(f.dir, tempPrefix+"*")
	if err != nil {
		return "", berth.WrapError(berth.EInternal, err, "cannot write checkpoint blobs")
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	src := &sourceReader{r: io.LimitReader(r, size+1)}
	n, err := io.Copy(io.MultiWriter(h, bw), src)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	var be *berth.Error
	switch {
	case err == nil && (n != size || hex.EncodeToString(h.Sum(nil)) != hash):
		err = berth.Errorf(berth.EInternal, "checkpoint %s: the blob %s does not match its hash", f.id, hash[:12])
	case err != nil && src.err != nil && !errors.As(err, &be):
		err = berth.WrapError(berth.EUnavailable, err, "checkpoint %s: cannot fetch the blob %s", f.id, hash[:12])
	case err != nil && src.err == nil:
		err = berth.WrapError(berth.EInternal, err, "cannot write checkpoint blobs")
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// sourceReader remembers the error its reader gave (not io.EOF): a copy's
// failure is the source's, or the disk's.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// sweepIncoming removes what imports a crash cut short left in
// incoming/ (those in flight are recorded in importing), and returns how
// many it removed.
func (s *Store) sweepIncoming() int {
	ents, err := os.ReadDir(filepath.Join(s.dir, incomingDir))
	if err != nil {
		return 0
	}
	var left []string
	s.mu.Lock()
	for _, e := range ents {
		if !s.importing[e.Name()] {
			left = append(left, e.Name())
		}
	}
	s.mu.Unlock()
	n := 0
	for _, name := range left {
		if os.RemoveAll(filepath.Join(s.dir, incomingDir, name)) == nil {
			n++
		}
	}
	return n
}
