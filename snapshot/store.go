package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/optx"
)

// Default limits of a Store made by New.
const (
	// DefaultMaxBytes bounds the total size of the regular files of one
	// snapshot (before compression).
	DefaultMaxBytes = 1 << 30
	// DefaultMaxEntries bounds the number of entries of one snapshot.
	DefaultMaxEntries = 100_000
)

// File name suffixes in a session's snapshot directory.
const (
	archiveExt = ".tar.zst"
	metaExt    = ".json"
	tempPrefix = atomicfile.TempPrefix
)

// Options bounds what a Store archives and restores. A zero field takes its
// default.
type Options struct {
	// MaxBytes bounds the total size of the regular files in a snapshot.
	// Create refuses a larger workspace, and Restore a larger archive,
	// with berth.ETooLarge. Zero means DefaultMaxBytes.
	MaxBytes int64
	// MaxEntries bounds the number of entries (files, directories and
	// symlinks) in a snapshot, the same way. Zero means DefaultMaxEntries.
	MaxEntries int
}

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	optx.Default(&o.MaxBytes, DefaultMaxBytes)
	optx.Default(&o.MaxEntries, DefaultMaxEntries)
	return o
}

// Store keeps snapshots under a directory, usually $BERTH_HOME/snapshots.
// Its methods are safe for concurrent use.
type Store struct {
	dir  string
	opts Options
}

// New returns a Store rooted at dir with the default Options. The directory
// is created on the first Create.
func New(dir string) *Store { return NewWithOptions(dir, Options{}) }

// NewWithOptions returns a Store rooted at dir with opts.
func NewWithOptions(dir string, opts Options) *Store {
	return &Store{dir: dir, opts: opts.withDefaults()}
}

// sessionDir returns the directory of sessionID's snapshots.
func (s *Store) sessionDir(sessionID string) string { return filepath.Join(s.dir, sessionID) }

// archivePath returns the path of a snapshot's archive.
func (s *Store) archivePath(sessionID, snapID string) string {
	return filepath.Join(s.sessionDir(sessionID), snapID+archiveExt)
}

// metaPath returns the path of a snapshot's metadata file.
func (s *Store) metaPath(sessionID, snapID string) string {
	return filepath.Join(s.sessionDir(sessionID), snapID+metaExt)
}

// List returns sessionID's snapshots, newest first; none when the session
// has none.
func (s *Store) List(ctx context.Context, sessionID string) ([]*Snapshot, error) {
	if !ids.ValidName(sessionID) {
		return nil, berth.Errorf(berth.EInvalid, "invalid session id %q", sessionID)
	}
	ents, err := os.ReadDir(s.sessionDir(sessionID))
	if errors.Is(err, fs.ErrNotExist) {
		return []*Snapshot{}, nil
	}
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot list snapshots")
	}
	snaps := []*Snapshot{}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id, ok := strings.CutSuffix(e.Name(), metaExt)
		if !ok || !ids.Valid(idPrefix, id) || !e.Type().IsRegular() {
			continue
		}
		snap, err := readMeta(s.metaPath(sessionID, id))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, snap)
	}
	slices.SortFunc(snaps, func(a, b *Snapshot) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return snaps, nil
}

// OpenArchive opens the archive of sessionID's snapshot snapID for
// reading (its .tar.zst, as Create wrote it); berth.ENotFound when it is
// gone.
func (s *Store) OpenArchive(sessionID, snapID string) (*os.File, error) {
	if !ids.ValidName(sessionID) || !ids.Valid(idPrefix, snapID) {
		return nil, berth.Errorf(berth.ENotFound, "snapshot %s not found", snapID)
	}
	f, err := os.Open(s.archivePath(sessionID, snapID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, berth.Errorf(berth.ENotFound, "snapshot %s not found", snapID)
	}
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot read snapshot")
	}
	return f, nil
}

// Get returns the snapshot snapID, or berth.ENotFound.
func (s *Store) Get(ctx context.Context, snapID string) (*Snapshot, error) {
	snap, _, err := s.find(ctx, snapID)
	return snap, err
}

// find returns the snapshot snapID and the path of its archive.
func (s *Store) find(ctx context.Context, snapID string) (*Snapshot, string, error) {
	if !ids.Valid(idPrefix, snapID) {
		return nil, "", berth.Errorf(berth.EInvalid, "invalid snapshot id %q", snapID)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", berth.WrapError(berth.EInternal, err, "cannot look up snapshot")
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		if !e.IsDir() || !ids.ValidName(e.Name()) {
			continue
		}
		snap, err := readMeta(s.metaPath(e.Name(), snapID))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		if snap.ID != snapID || snap.SessionID != e.Name() {
			return nil, "", berth.Errorf(berth.EInternal, "snapshot %s has inconsistent metadata", snapID)
		}
		return snap, s.archivePath(e.Name(), snapID), nil
	}
	return nil, "", berth.Errorf(berth.ENotFound, "no snapshot %s", snapID)
}

// Delete removes all of sessionID's snapshots. Deleting a session without
// snapshots is not an error.
func (s *Store) Delete(sessionID string) error {
	if !ids.ValidName(sessionID) {
		return berth.Errorf(berth.EInvalid, "invalid session id %q", sessionID)
	}
	if err := os.RemoveAll(s.sessionDir(sessionID)); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot delete snapshots")
	}
	return nil
}

// readMeta reads a metadata file. A missing file is returned as is (an
// fs.ErrNotExist); anything else wrong is berth.EInternal.
func readMeta(path string) (*Snapshot, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot read snapshot metadata")
	}
	var snap Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "corrupt snapshot metadata")
	}
	return &snap, nil
}
