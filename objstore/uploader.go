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
)

// Uploader writes trees and checkpoints to a Client, each blob once: a
// blob it knows is in the store (put or seen by this Uploader) is not
// looked at again, and one the store has already is not put again.
// Safe for concurrent use.
type Uploader struct {
	c *Client
	// spoolDir holds the copies of large files being put ("" is the
	// system's temp dir).
	spoolDir string
	mu       sync.Mutex
	known    map[string]struct{}
	// puts counts the blobs put, heads the blobs looked at (tests).
	puts, heads atomic.Int64
}

// maxKnown bounds the blobs an Uploader remembers; past it it starts over
// (the store is asked again).
const maxKnown = 1 << 20

// memSpool is the largest file copied in memory before it is put; a
// larger one is copied to a temporary file.
const memSpool = 4 << 20

// NewUploader returns an Uploader to c; large files are copied under
// spoolDir while they are put ("" is os.TempDir()).
func NewUploader(c *Client, spoolDir string) *Uploader {
	return &Uploader{c: c, spoolDir: spoolDir, known: map[string]struct{}{}}
}

// Client is the client the Uploader writes to.
func (u *Uploader) Client() *Client { return u.c }

// Puts is how many blobs the Uploader put.
func (u *Uploader) Puts() int64 { return u.puts.Load() }

func (u *Uploader) isKnown(hash string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.known[hash]
	return ok
}

func (u *Uploader) markKnown(hash string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.known) >= maxKnown {
		u.known = map[string]struct{}{}
	}
	u.known[hash] = struct{}{}
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
func (u *Uploader) putBlob(ctx context.Context, hash string, r io.Reader, size int64) error {
	ok, err := u.have(ctx, hash)
	if err != nil || ok {
		return err
	}
	if err := u.c.Put(ctx, BlobKey(hash), r, size); err != nil {
		return err
	}
	u.puts.Add(1)
	u.markKnown(hash)
	return nil
}

// Tree puts the blobs of the directory dir and returns its manifest,
// walked as a checkpoint walks a workspace (checkpoint.Scan: no link
// followed, the same bounds, hide left out). prev, the entries a previous
// Tree of the same dir returned, spares the files unchanged since a read;
// the entries returned are for the next call.
func (u *Uploader) Tree(ctx context.Context, dir string, opts checkpoint.Options, hide []string, prev map[string]checkpoint.Entry) (*Tree, map[string]checkpoint.Entry, error) {
	t := &Tree{Files: []File{}}
	seen := make(map[string]checkpoint.Entry, len(prev))
	skipped, n, err := checkpoint.Scan(ctx, dir, opts, hide, func(e checkpoint.Entry, f *checkpoint.ScanFile) error {
		if f != nil {
			if p, ok := prev[e.Path]; ok && p.Hash != "" && checkpoint.SameStat(&p, &e) && u.isKnown(p.Hash) {
				e.Hash = p.Hash
			} else {
				h, err := u.putFile(ctx, f)
				if err != nil {
					return err
				}
				e.Hash = h
			}
		}
		seen[e.Path] = e
		t.Files = append(t.Files, fileOf(e))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	t.Skipped, t.SkippedTotal = skipped, n
	return t, seen, nil
}

// fileOf is the manifest line of a checkpoint entry: set-id and sticky
// bits dropped.
func fileOf(e checkpoint.Entry) File {
	return File{Path: e.Path, Kind: e.Kind, Mode: e.Mode & 0o777, Size: e.Size, SHA256: e.Hash, Target: e.Target}
}

// putFile copies the file f while hashing it (so what is put is what was
// hashed, however the file changes meanwhile), puts it unless the store
// has it, and returns its hash. checkpoint.ErrChanged when the file's
// size changed under the read.
func (u *Uploader) putFile(ctx context.Context, f *checkpoint.ScanFile) (string, error) {
	src, err := f.Open()
	if err != nil {
		return "", err
	}
	defer src.Close()
	h := sha256.New()
	var body io.ReadSeeker
	if f.Size <= memSpool {
		var buf bytes.Buffer
		buf.Grow(int(f.Size))
		if n, err := io.Copy(io.MultiWriter(h, &buf), io.LimitReader(src, f.Size+1)); err != nil {
			return "", berth.WrapError(berth.EInternal, err, "read %s", f.Path)
		} else if n != f.Size {
			return "", checkpoint.ErrChanged
		}
		body = bytes.NewReader(buf.Bytes())
	} else {
		tmp, err := os.CreateTemp(u.spoolDir, ".berth-objstore-*")
		if err != nil {
			return "", berth.WrapError(berth.EInternal, err, "cannot make a spool file")
		}
		defer tmp.Close()
		_ = os.Remove(tmp.Name())
		if n, err := io.Copy(io.MultiWriter(h, tmp), io.LimitReader(src, f.Size+1)); err != nil {
			return "", berth.WrapError(berth.EInternal, err, "read %s", f.Path)
		} else if n != f.Size {
			return "", checkpoint.ErrChanged
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return "", berth.WrapError(berth.EInternal, err, "rewind a spool file")
		}
		body = tmp
	}
	hash := hex.EncodeToString(h.Sum(nil))
	return hash, u.putBlob(ctx, hash, body, f.Size)
}

// Checkpoint puts the session's checkpoint ckpt from the local store cs:
// its blobs not in the object store yet, then its metadata and manifest.
// A checkpoint pruned meanwhile is ENotFound.
func (u *Uploader) Checkpoint(ctx context.Context, cs *checkpoint.Store, sessionID, ckpt string) error {
	meta, entries, err := cs.Entries(sessionID, ckpt)
	if err != nil {
		return err
	}
	files := make([]File, 0, len(entries))
	for _, e := range entries {
		if e.Kind == checkpoint.KindFile {
			if err := u.putLocalBlob(ctx, cs, e.Hash, e.Size); err != nil {
				return err
			}
		}
		files = append(files, fileOf(e))
	}
	return u.c.putJSON(ctx, CheckpointKey(sessionID, ckpt), StoredCheckpoint{Checkpoint: meta, Files: files})
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
