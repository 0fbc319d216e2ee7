package checkpoint

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
	"github.com/berth-sh/berth/internal/linkcheck"
	"github.com/berth-sh/berth/internal/optx"
)

// Default limits of a Store.
const (
	// DefaultMaxFileBytes: a file larger than this is skipped.
	DefaultMaxFileBytes = 10 << 20
	// DefaultMaxTotalBytes bounds the files of one checkpoint.
	DefaultMaxTotalBytes = 1 << 30
	// DefaultMaxEntries bounds the entries of one checkpoint.
	DefaultMaxEntries = 200_000
	// DefaultMaxListBytes bounds one directory's listing (Options).
	DefaultMaxListBytes = 64 << 20
	// DefaultMaxTreeBytes bounds what the checkpoints of one tree take on
	// disk (Options.MaxTreeBytes).
	DefaultMaxTreeBytes = 2 << 30
)

// File names.
const (
	metaExt    = ".json"
	entriesExt = ".entries"
	tempPrefix = atomicfile.TempPrefix
	// treeFile, in a session's directory, names the tree its checkpoints
	// count in (its root session); a session without one is its own.
	treeFile = "tree"
	// prunedFile, in a session's directory, holds the id of the newest
	// checkpoint of the session that was pruned.
	prunedFile = "pruned"
)

// Options bound what one checkpoint records; a zero field takes its default.
type Options struct {
	MaxFileBytes  int64
	MaxTotalBytes int64
	MaxEntries    int
	// MaxPathTotalBytes bounds the sum of the kept paths' lengths.
	MaxPathTotalBytes int
	// MaxListBytes bounds one directory's listing in memory: a directory
	// of more names (millions, that an agent makes in a minute) is left
	// out whole, as total_limit, rather than read.
	MaxListBytes int
	// MaxTreeBytes bounds what the checkpoints of a tree (a root session
	// and its children) take on disk, each blob counted once (index.go):
	// past it Prune removes the tree's oldest checkpoints.
	MaxTreeBytes int64
	// Whole keeps .git and .gitignore'd paths (Scan of a workspace that
	// moves to another node, not a checkpoint's walk).
	Whole bool
	// ignoreWork bounds a walk's .gitignore matching (defaultIgnoreWork;
	// tests lower it).
	ignoreWork int64
}

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	optx.Default(&o.MaxFileBytes, DefaultMaxFileBytes)
	optx.Default(&o.MaxTotalBytes, DefaultMaxTotalBytes)
	optx.Default(&o.MaxEntries, DefaultMaxEntries)
	optx.Default(&o.ignoreWork, defaultIgnoreWork)
	optx.Default(&o.MaxListBytes, DefaultMaxListBytes)
	optx.Default(&o.MaxPathTotalBytes, DefaultMaxPathTotalBytes)
	optx.Default(&o.MaxTreeBytes, DefaultMaxTreeBytes)
	return o
}

// Store keeps checkpoints under a directory. Its methods are safe for
// concurrent use; one Store uses a directory at a time (the daemon's home
// lock sees to it): its accounting is in memory.
//
// Lock order: a session's lock, then gc, then ixMu (or mu).
type Store struct {
	dir  string
	opts Options
	// gc is held shared by a create from its first blob to its manifest
	// and its accounting, by a restore while it copies blobs, by a prune
	// or delete while it removes manifests, and by an import from its
	// first blob in place to its manifest (not while it fetches them);
	// exclusively by a sweep and while blobs are removed.
	gc sync.RWMutex
	// mu guards last: each session's newest manifest, whose stat fields
	// spare the next checkpoint from reading unchanged files; trees,
	// each session's tree as recorded; and importing, the directories of
	// the imports fetching blobs (import.go).
	mu        sync.Mutex
	last      map[string]*manifest
	trees     map[string]string
	locks     map[string]*sessionLock
	importing map[string]bool
	// ixMu guards ix, the accounting of the trees (index.go); nil until
	// built, and when it lost count.
	ixMu sync.Mutex
	ix   *index
	// reads counts the files read to be hashed, manifestReads the
	// manifest files read (the tests look).
	reads         atomic.Int64
	manifestReads atomic.Int64
	// sweeps counts the times gc was held exclusively: blobs may have
	// gone, so a warm capture taken before is stale (warm.go).
	sweeps atomic.Uint64
	// warmLive counts the warm captures kept, warmMade all made,
	// warmTaken those a turn took.
	warmLive, warmMade, warmTaken atomic.Int64
	// watchMu guards watch, the inotify instance of the warm captures
	// (made on the first), and warmSem bounds the warm walks at once (half
	// the CPUs: they run beside the turns of other sessions).
	watchMu     sync.Mutex
	watch       *watcher
	watchClosed bool
	warmSem     chan struct{}
	// commitMu runs the commits' writes one group at a time; commitQMu
	// guards commitQ, the commits waiting for the next group
	// (Pending.Commit).
	commitMu  sync.Mutex
	commitQMu sync.Mutex
	commitQ   []*commitReq
	// commitGroups counts the groups written.
	commitGroups atomic.Int64
}

// lockGC takes gc exclusively, counted in sweeps.
func (s *Store) lockGC() {
	s.gc.Lock()
	s.sweeps.Add(1)
}

// manifest is a checkpoint with its entries, and the entries by path.
type manifest struct {
	meta    *Checkpoint
	entries []Entry
	byPath  map[string]*Entry
	// chain is how many deltas lie between it and a full manifest.
	chain int
	// sigs are the walk's .gitignore signatures by directory (see
	// walker); nil for a manifest read from disk.
	sigs map[string]string
}

// New returns a Store rooted at dir (created on first use).
func New(dir string, opts Options) *Store {
	return &Store{dir: dir, opts: opts.withDefaults(), last: map[string]*manifest{}, trees: map[string]string{},
		locks: map[string]*sessionLock{}, importing: map[string]bool{}, warmSem: make(chan struct{}, max(1, runtime.NumCPU()/2))}
}

// Options returns the store's limits, defaults filled in.
func (s *Store) Options() Options { return s.opts }

func (s *Store) blobDir() string { return filepath.Join(s.dir, "blobs") }
func (s *Store) sessionDir(sessionID string) string {
	return filepath.Join(s.dir, "sessions", sessionID)
}
func (s *Store) blobPath(hash string) string {
	return filepath.Join(s.blobDir(), hash[:2], hash)
}
func (s *Store) metaPath(sessionID, id string) string {
	return filepath.Join(s.sessionDir(sessionID), id+metaExt)
}
func (s *Store) entriesPath(sessionID, id string) string {
	return filepath.Join(s.sessionDir(sessionID), id+entriesExt)
}

// lockSession takes the session's lock (a capture holds it until its
// commit) and returns its unlock.
func (s *Store) lockSession(sessionID string) func() {
	s.mu.Lock()
	l := s.locks[sessionID]
	if l == nil {
		l = &sessionLock{}
		s.locks[sessionID] = l
	}
	l.users++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.locks, sessionID)
		}
		s.mu.Unlock()
	}
}

// sessionLock is one session's lock and how many hold or wait for it.
type sessionLock struct {
	mu    sync.Mutex
	users int
}

// List returns the session's checkpoints, oldest first; none for a session
// that has none. A checkpoint being committed is waited for.
func (s *Store) List(sessionID string) ([]*Checkpoint, error) {
	if !ids.ValidName(sessionID) {
		return nil, berth.Errorf(berth.EInvalid, "invalid session id")
	}
	defer s.lockSession(sessionID)()
	return s.list(sessionID)
}

// list is List for a caller that holds the session's lock.
func (s *Store) list(sessionID string) ([]*Checkpoint, error) {
	ents, err := os.ReadDir(s.sessionDir(sessionID))
	if errors.Is(err, fs.ErrNotExist) {
		return []*Checkpoint{}, nil
	}
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot list checkpoints")
	}
	out := []*Checkpoint{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), metaExt)
		if !ok || !ids.Valid(idPrefix, id) {
			continue
		}
		c, err := s.readMeta(sessionID, id)
		if err != nil {
			continue // removed meanwhile, or torn: not a checkpoint
		}
		out = append(out, c)
	}
	// ULIDs sort by time.
	slices.SortFunc(out, func(a, b *Checkpoint) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Get returns one checkpoint of the session. ENotFound.
func (s *Store) Get(sessionID, id string) (*Checkpoint, error) {
	if !ids.ValidName(sessionID) || !ids.Valid(idPrefix, id) {
		return nil, berth.Errorf(berth.ENotFound, "no checkpoint %s", id)
	}
	defer s.lockSession(sessionID)()
	return s.readMeta(sessionID, id)
}

// readMeta reads a checkpoint's metadata. ENotFound.
func (s *Store) readMeta(sessionID, id string) (*Checkpoint, error) {
	b, err := os.ReadFile(s.metaPath(sessionID, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s.notFound(sessionID, id)
	}
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "cannot read checkpoint")
	}
	c := new(Checkpoint)
	if err := json.Unmarshal(b, c); err != nil || c.ID != id {
		return nil, berth.Errorf(berth.EInternal, "checkpoint %s is damaged", id)
	}
	return c, nil
}

// maxChain bounds the deltas between two full manifests: a manifest read
// opens at most this many files.
const maxChain = 32

// kindRemoved marks, in a delta manifest, a path its base has and it has not.
const kindRemoved = "-"

// header is the first line of a manifest file: Base names the checkpoint
// whose entries this one changes ("" for a full manifest).
type header struct {
	V    int    `json:"v"`
	Base string `json:"base,omitempty"`
}

// readManifest reads and checks a checkpoint's entries, following its
// chain of deltas: every path valid and unique, below a directory entry
// of its own, every hash well formed. A manifest that fails is EInternal:
// nothing of it is used.
func (s *Store) readManifest(sessionID, id string) (*manifest, error) {
	if !ids.ValidName(sessionID) || !ids.Valid(idPrefix, id) {
		return nil, berth.Errorf(berth.ENotFound, "no checkpoint %s", id)
	}
	meta, err := s.readMeta(sessionID, id)
	if err != nil {
		return nil, err
	}
	byPath := map[string]Entry{}
	chain, err := s.resolve(sessionID, id, byPath, 0)
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		entries = append(entries, e)
	}
	// A parent's path is a prefix of its children's: it sorts first.
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	byEntry, err := checkEntries(id, entries)
	if err != nil {
		return nil, err
	}
	return &manifest{meta: meta, entries: entries, byPath: byEntry, chain: chain}, nil
}

// checkEntries checks the entries of checkpoint id, sorted by path: every
// path valid and unique, below a directory entry of its own, every hash
// well formed, every symlink inside the workspace, every kind known. It
// returns them by path; EInternal when one fails.
func checkEntries(id string, entries []Entry) (map[string]*Entry, error) {
	byPath := make(map[string]*Entry, len(entries))
	for i := range entries {
		e := &entries[i]
		if !validEntryPath(e.Path) || byPath[e.Path] != nil {
			return nil, berth.Errorf(berth.EInternal, "checkpoint %s has a bad path", id)
		}
		if dir := path.Dir(e.Path); dir != "." {
			if p := byPath[dir]; p == nil || p.Kind != KindDir {
				return nil, berth.Errorf(berth.EInternal, "checkpoint %s has a path outside its directories", id)
			}
		}
		if err := checkEntry(id, e); err != nil {
			return nil, err
		}
		byPath[e.Path] = e
	}
	return byPath, nil
}

// checkEntry checks what an entry of checkpoint id holds: a file's hash,
// a symlink's target inside the workspace, a kind it knows.
func checkEntry(id string, e *Entry) error {
	switch e.Kind {
	case KindFile:
		if !validHash(e.Hash) || e.Size < 0 {
			return berth.Errorf(berth.EInternal, "checkpoint %s has a bad hash", id)
		}
	case KindSymlink:
		if linkcheck.LexicallyEscapes(e.Path, e.Target) {
			return berth.Errorf(berth.EInternal, "checkpoint %s has a symlink out of the workspace", id)
		}
	case KindDir:
	default:
		return berth.Errorf(berth.EInternal, "checkpoint %s has an entry of unknown kind", id)
	}
	return nil
}

// resolve fills byPath with the entries of checkpoint id, its bases' first,
// and returns how many deltas deep id is.
func (s *Store) resolve(sessionID, id string, byPath map[string]Entry, depth int) (int, error) {
	if depth > maxChain || !ids.Valid(idPrefix, id) {
		return 0, berth.WrapError(berth.EInternal, errDamaged, "checkpoint %s has a broken chain", id)
	}
	h, entries, err := s.readEntries(s.entriesPath(sessionID, id))
	if err != nil {
		return 0, err
	}
	chain := 0
	if h.Base != "" {
		below, err := s.resolve(sessionID, h.Base, byPath, depth+1)
		if err != nil {
			return 0, err
		}
		chain = below + 1
	}
	for _, e := range entries {
		if e.Kind == kindRemoved {
			delete(byPath, e.Path)
			continue
		}
		byPath[e.Path] = e
	}
	return chain, nil
}

// errDamaged is a manifest whose content is not one this store wrote (an
// I/O error reading it is not).
var errDamaged = errors.New("damaged manifest")

// readEntries reads a manifest file: a header, then one JSON Entry a line.
// ENotFound when it is gone; errDamaged (EInternal) when its content is
// not a manifest.
func (s *Store) readEntries(name string) (header, []Entry, error) {
	var h header
	s.manifestReads.Add(1)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil, berth.Errorf(berth.ENotFound, "checkpoint entries are gone")
	}
	if err != nil {
		return h, nil, berth.WrapError(berth.EInternal, err, "cannot read checkpoint")
	}
	defer f.Close()
	var out []Entry
	dec := json.NewDecoder(bufio.NewReaderSize(f, 64<<10))
	if err := dec.Decode(&h); err != nil || h.V != 1 {
		return h, nil, decodeError(err)
	}
	for dec.More() {
		var e Entry
		if err := dec.Decode(&e); err != nil {
			return h, nil, decodeError(err)
		}
		out = append(out, e)
	}
	return h, out, nil
}

// decodeError tells a manifest's damage (errDamaged) from an error
// reading it.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if err == nil || errors.As(err, &syn) || errors.As(err, &typ) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return berth.WrapError(berth.EInternal, errDamaged, "checkpoint entries are damaged")
	}
	return berth.WrapError(berth.EInternal, err, "cannot read checkpoint")
}

// Delete removes every checkpoint of the session, then the blobs no other
// checkpoint names (the session's runs, read from its own manifests, leave
// the accounting: no other manifest is read). Deleting a session that has
// none is not an error.
func (s *Store) Delete(sessionID string) error {
	if !ids.ValidName(sessionID) {
		return berth.Errorf(berth.EInvalid, "invalid session id")
	}
	// Without the accounting the files still go; the blobs stay for the
	// sweep that builds it.
	ixErr := s.ensureIndex()
	unlock := s.lockSession(sessionID)
	s.gc.RLock()
	s.mu.Lock()
	delete(s.last, sessionID)
	delete(s.trees, sessionID)
	s.mu.Unlock()
	ix, dead, err := s.unaccount(sessionID)
	if err != nil {
		// The disk and the accounting disagree: it is counted again from
		// the disk once the session is gone, and that sweep removes its
		// blobs.
		s.invalidate(ix)
		ix, dead = nil, nil
	}
	if err = s.removeSession(sessionID); err != nil {
		// What is left of it is counted nowhere: counted again from disk.
		s.invalidate(ix)
	}
	s.gc.RUnlock()
	unlock()
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot remove checkpoints")
	}
	s.free(ix, dead)
	return ixErr
}

// unaccount takes the session's checkpoints out of the index: the runs
// they hold, read from its manifests as a sweep reads them. It returns the
// index and the blobs no tree names any more; an error when the disk and
// the index disagree (the index must be built again). The caller holds
// the session's lock and gc shared.
func (s *Store) unaccount(sessionID string) (*index, []run, error) {
	s.ixMu.Lock()
	ix := s.ix
	ses := ix.sessionOf(sessionID)
	var ckpts []ixCheckpoint
	if ses != nil {
		ckpts = slices.Clone(ses.ckpts)
	}
	s.ixMu.Unlock()
	if ses == nil {
		return ix, nil, nil
	}
	ids := make([]string, len(ckpts))
	for i, c := range ckpts {
		ids[i] = c.id
	}
	files, err := s.listSession(sessionID)
	if err != nil {
		return ix, nil, err
	}
	if !slices.Equal(files.metas, ids) {
		return ix, nil, errAccounting
	}
	var read []ixCheckpoint
	var runs []run
	if _, err := s.walkRuns(sessionID, ids, func(c ixCheckpoint, started []run) {
		read = append(read, c)
		runs = append(runs, started...)
	}); err != nil {
		return ix, nil, err
	}
	var own int64
	for i, c := range ckpts {
		if read[i].damaged != c.damaged {
			return ix, nil, errAccounting
		}
		own += c.bytes
	}
	s.ixMu.Lock()
	defer s.ixMu.Unlock()
	if s.ix != ix {
		return ix, nil, nil
	}
	_, dead, err := ix.end(ses.tree, runs)
	if err != nil {
		return ix, nil, err
	}
	ses.tree.bytes -= own
	ix.forget(ses)
	return ix, dead, nil
}

// removeSession removes the session's directory: its checkpoints'
// metadata newest first, so a crash midway leaves the oldest listed, each
// with the manifests it is a delta on; then the rest.
func (s *Store) removeSession(sessionID string) error {
	dir := s.sessionDir(sessionID)
	files, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := len(files) - 1; i >= 0; i-- {
		if id, ok := strings.CutSuffix(files[i].Name(), metaExt); ok && ids.Valid(idPrefix, id) {
			if err := os.Remove(filepath.Join(dir, files[i].Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return os.RemoveAll(dir)
}
