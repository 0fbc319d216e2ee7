package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/snapshot"
	"golang.org/x/sync/errgroup"
)

// Uploader writes trees and checkpoints to a Client, each content once:
// a file of up to PackMaxFile bytes in a pack (a file's bytes the
// Uploader packed before are not packed again), a larger one, and each
// checkpoint's, as a blob (one the Uploader knows is in the store, or
// the store has already, is not put again). Safe for concurrent use.
type Uploader struct {
	c *Client
	// spoolDir holds the copies of large files being put ("" is the
	// system's temp dir).
	spoolDir string
	mu       sync.Mutex
	known    map[string]where
	// puts counts the objects put, heads the objects looked at, putBytes
	// the bytes put.
	puts, heads, putBytes atomic.Int64
}

// where is what an Uploader knows of one content in the store: that its
// blob is there, and where a pack it put holds it (pack "" when none).
type where struct {
	blob   bool
	pack   string
	offset int64
}

// maxKnown bounds the contents an Uploader remembers; past it it starts
// over (blobs are looked for in the store again, small files packed
// again).
const maxKnown = 1 << 20

// memSpool is the largest file copied in memory before it is put; a
// larger one is copied to a temporary file.
const memSpool = 4 << 20

// NewUploader returns an Uploader to c; large files are copied under
// spoolDir while they are put ("" is os.TempDir()).
func NewUploader(c *Client, spoolDir string) *Uploader {
	return &Uploader{c: c, spoolDir: spoolDir, known: map[string]where{}}
}

// Client is the client the Uploader writes to.
func (u *Uploader) Client() *Client { return u.c }

// Puts is how many objects (blobs and packs) the Uploader put.
func (u *Uploader) Puts() int64 { return u.puts.Load() }

// PutBytes is how many bytes the Uploader put in blobs and packs.
func (u *Uploader) PutBytes() int64 { return u.putBytes.Load() }

// isKnown reports whether the store has the blob of hash, as far as the
// Uploader knows.
func (u *Uploader) isKnown(hash string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.known[hash].blob
}

// packed reports where a pack the Uploader put holds the content of hash.
func (u *Uploader) packed(hash string) (pack string, offset int64, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	w := u.known[hash]
	return w.pack, w.offset, w.pack != ""
}

// markKnown records that the store has the blob of hash.
func (u *Uploader) markKnown(hash string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.roomLocked(1)
	w := u.known[hash]
	w.blob = true
	u.known[hash] = w
}

// markPacked records where the pack just put holds each of its contents.
func (u *Uploader) markPacked(pack string, contents []packed) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.roomLocked(len(contents))
	for _, p := range contents {
		w := u.known[p.hash]
		w.pack, w.offset = pack, p.offset
		u.known[p.hash] = w
	}
}

// roomLocked starts over when n more contents would pass maxKnown.
func (u *Uploader) roomLocked(n int) {
	if len(u.known)+n > maxKnown {
		u.known = map[string]where{}
	}
}

// Learn records where the packs of session sessionID's state in the
// store hold its files, so that Trees of the same files pack none of them
// again (a daemon that restarted, or the node the session moved to, knows
// no pack). Each pack is looked at, Workers at a time: one missing or
// shorter than the state says is not learnt. A session the store has no
// state of, or none this berth reads, teaches nothing (nil); an error is
// the store's.
func (u *Uploader) Learn(ctx context.Context, sessionID string) error {
	st, err := ReadState(ctx, u.c, sessionID)
	if berth.IsCode(err, berth.ENotFound) || berth.IsCode(err, berth.EInternal) {
		return nil
	}
	if err != nil {
		return err
	}
	// Each pack's files, and the end of the last one's bytes.
	type named struct {
		contents []packed
		end      int64
	}
	packs := map[string]*named{}
	for _, t := range []*Tree{st.Workspace, st.Home} {
		if t == nil {
			continue
		}
		for _, f := range t.Files {
			if f.Kind != checkpoint.KindFile || f.Pack == "" || !checkpoint.ValidHash(f.SHA256) || checkPacked(f) != nil {
				continue
			}
			n := packs[f.Pack]
			if n == nil {
				n = &named{}
				packs[f.Pack] = n
			}
			n.contents = append(n.contents, packed{hash: f.SHA256, offset: f.Offset})
			n.end = max(n.end, f.Offset+f.Size)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Workers)
	for pack, n := range packs {
		g.Go(func() error {
			u.heads.Add(1)
			size, ok, err := u.c.Stat(gctx, PackKey(pack))
			if ok && size >= n.end {
				u.markPacked(pack, n.contents)
			}
			return err
		})
	}
	return g.Wait()
}

// have reports whether the store has the blob of hash.
func (u *Uploader) have(ctx context.Context, hash string) (bool, error) {
	if u.isKnown(hash) {
		return true, nil
	}
	u.heads.Add(1)
	_, ok, err := u.c.Stat(ctx, BlobKey(hash))
	if ok {
		u.markKnown(hash)
	}
	return ok, err
}

// putBlob puts the size bytes of r as the blob of hash unless the store
// has it. r's content must be hash's (the caller checked).
func (u *Uploader) putBlob(ctx context.Context, hash string, r io.ReaderAt, size int64) error {
	ok, err := u.have(ctx, hash)
	if err != nil || ok {
		return err
	}
	if err := u.c.Put(ctx, BlobKey(hash), r, size); err != nil {
		return err
	}
	u.puts.Add(1)
	u.putBytes.Add(size)
	u.markKnown(hash)
	return nil
}

// Tree puts the contents of the directory dir and returns its manifest,
// walked as a checkpoint walks a workspace (checkpoint.Scan: no link
// followed, the same bounds, hide left out). prev, the entries a previous
// Tree of the same dir returned, spares the files unchanged since a read;
// the entries returned are for the next call. Files are read in walk
// order: those of up to PackMaxFile bytes are packed (packer), larger
// ones put as blobs, Workers objects at a time. Every object the
// manifest names is in the store when Tree returns.
func (u *Uploader) Tree(ctx context.Context, dir string, opts checkpoint.Options, hide []string, prev map[string]checkpoint.Entry) (*Tree, map[string]checkpoint.Entry, error) {
	t := &Tree{Files: []File{}}
	seen := make(map[string]checkpoint.Entry, len(prev))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(Workers)
	pk := newPacker(gctx, u, g, t)
	skipped, n, err := checkpoint.Scan(gctx, dir, opts, hide, func(e checkpoint.Entry, f *checkpoint.ScanFile) error {
		file := fileOf(e)
		if f != nil {
			var err error
			if f.Size <= PackMaxFile {
				err = pk.add(&file, f, prev[e.Path])
			} else {
				err = u.treeBlob(gctx, g, &file, f, prev[e.Path])
			}
			if err != nil {
				return err
			}
			e.Hash = file.SHA256
		}
		seen[e.Path] = e
		t.Files = append(t.Files, file)
		return nil
	})
	if err == nil {
		pk.seal()
	}
	// A failed put or get cancels the walk: its error is the one to tell.
	if werr := g.Wait(); werr != nil {
		err = werr
	}
	if err != nil {
		return nil, nil, err
	}
	t.Skipped, t.SkippedTotal = skipped, n
	return t, seen, nil
}

// treeBlob gives file, a large file f of a Tree, its hash, and puts its
// blob through g unless the store has it; p is its entry in the
// previous walk (zero when none).
func (u *Uploader) treeBlob(ctx context.Context, g *errgroup.Group, file *File, f *checkpoint.ScanFile, p checkpoint.Entry) error {
	if p.Hash != "" && checkpoint.SameStat(&p, &f.Entry) && u.isKnown(p.Hash) {
		file.SHA256 = p.Hash
		return nil
	}
	sp, err := u.spool(f)
	if err != nil {
		return err
	}
	file.SHA256 = sp.hash
	if u.isKnown(sp.hash) {
		sp.close()
		return nil
	}
	// Waits while Workers puts are under way.
	g.Go(func() error {
		defer sp.close()
		return u.putBlob(ctx, sp.hash, sp.body, f.Size)
	})
	return nil
}

// Workers bounds the objects a Tree puts, and a Restore gets, at once.
const Workers = 16

// fileOf is the manifest line of a checkpoint entry: set-id and sticky
// bits dropped.
func fileOf(e checkpoint.Entry) File {
	return File{Path: e.Path, Kind: e.Kind, Mode: e.Mode & 0o777, Size: e.Size, SHA256: e.Hash, Target: e.Target}
}

// spooled is a file's content copied while it was hashed: what is put is
// what was hashed, however the file changes meanwhile.
type spooled struct {
	hash  string
	body  io.ReaderAt
	close func()
}

// spool copies the file f (in memory up to memSpool, else to a temporary
// file) while hashing it. checkpoint.ErrChanged when its size changed
// under the read.
func (u *Uploader) spool(f *checkpoint.ScanFile) (*spooled, error) {
	src, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer src.Close()
	h := sha256.New()
	sp := &spooled{close: func() {}}
	var dst io.Writer
	var buf *bytes.Buffer
	var tmp *os.File
	if f.Size <= memSpool {
		buf = bytes.NewBuffer(make([]byte, 0, f.Size))
		dst = buf
	} else {
		if tmp, err = os.CreateTemp(u.spoolDir, ".berth-objstore-*"); err != nil {
			return nil, berth.WrapError(berth.EInternal, err, "cannot make a spool file")
		}
		// Unlinked at once: it goes when closed, whatever happens.
		_ = os.Remove(tmp.Name())
		sp.close = func() { _ = tmp.Close() }
		dst = tmp
	}
	n, err := io.Copy(io.MultiWriter(h, dst), io.LimitReader(src, f.Size+1))
	if err == nil && n != f.Size {
		err = checkpoint.ErrChanged
	}
	if err == nil && tmp != nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		sp.close()
		if errors.Is(err, checkpoint.ErrChanged) {
			return nil, err
		}
		return nil, berth.WrapError(berth.EInternal, err, "read %s", f.Path)
	}
	sp.hash = hex.EncodeToString(h.Sum(nil))
	if tmp != nil {
		sp.body = tmp
	} else {
		sp.body = bytes.NewReader(buf.Bytes())
	}
	return sp, nil
}

// Snapshot puts the archive of snap from the local snapshot store ss,
// then its metadata, under the session's snapshots/.
func (u *Uploader) Snapshot(ctx context.Context, ss *snapshot.Store, snap *snapshot.Snapshot) error {
	f, err := ss.OpenArchive(snap.SessionID, snap.ID)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot read snapshot")
	}
	if err := u.c.Put(ctx, SnapshotKey(snap.SessionID, snap.ID+".tar.zst"), f, fi.Size()); err != nil {
		return err
	}
	return u.c.putJSON(ctx, SnapshotKey(snap.SessionID, snap.ID+".json"), snap)
}
