package checkpoint

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/internal/ids"
)

// Sweep builds the store's accounting (index.go) from the manifests on
// disk and repairs what a crash left: temporary files (an import's
// fetched blobs among them), manifests whose
// metadata never got written (or whose metadata a prune removed first),
// and blobs no checkpoint names. It returns how many files it removed. A
// manifest that cannot be read keeps every blob: a blob is never removed
// on a guess. The daemon's boot runs it; Delete and Prune run it when the
// accounting is not built.
func (s *Store) Sweep() (int, error) {
	s.lockGC()
	defer s.gc.Unlock()
	ix := newIndex()
	removed, clean := 0, true
	sessions, err := os.ReadDir(filepath.Join(s.dir, "sessions"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, berth.WrapError(berth.EInternal, err, "cannot sweep checkpoints")
	}
	for _, sd := range sessions {
		if !sd.IsDir() || !ids.ValidName(sd.Name()) {
			continue
		}
		n, ok, err := s.scanSession(ix, sd.Name())
		if err != nil {
			return 0, err
		}
		removed += n
		clean = clean && ok
	}
	s.ixMu.Lock()
	s.ix = ix
	s.ixMu.Unlock()
	n, err := s.sweepBlobs(ix, clean)
	return removed + n + s.sweepIncoming(), err
}

// sessionFiles are the files of a session's directory, by kind.
type sessionFiles struct {
	// metas are the ids of the listed checkpoints, oldest first.
	metas []string
	// bytes is the footprint of each checkpoint's files.
	bytes map[string]int64
	// entries are the ids of the manifests; temps the temporary files.
	entries map[string]bool
	temps   []string
}

// listSession reads a session's directory.
func (s *Store) listSession(sid string) (*sessionFiles, error) {
	ents, err := os.ReadDir(s.sessionDir(sid))
	if err != nil {
		return nil, err
	}
	f := &sessionFiles{bytes: map[string]int64{}, entries: map[string]bool{}}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, tempPrefix) {
			f.temps = append(f.temps, name)
			continue
		}
		id, isMeta := strings.CutSuffix(name, metaExt)
		if !isMeta {
			id, _ = strings.CutSuffix(name, entriesExt)
		}
		if id == name || !ids.Valid(idPrefix, id) {
			continue
		}
		if isMeta {
			f.metas = append(f.metas, id)
		} else {
			f.entries[id] = true
		}
		if fi, err := e.Info(); err == nil {
			f.bytes[id] += footprint(fi.Size())
		}
	}
	slices.Sort(f.metas)
	return f, nil
}

// scanSession adds one session's checkpoints to ix, oldest first, and
// removes its leftovers. It returns how many files it removed and false
// when a manifest was damaged.
func (s *Store) scanSession(ix *index, sid string) (int, bool, error) {
	files, err := s.listSession(sid)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, berth.WrapError(berth.EInternal, err, "cannot sweep checkpoints")
	}
	removed := 0
	for _, name := range files.temps {
		// A write no lock holder has in flight: a crash's.
		if os.Remove(filepath.Join(s.sessionDir(sid), name)) == nil {
			removed++
		}
	}
	var ses *ixSession
	if len(files.metas) > 0 {
		ses, _ = ix.session(sid, s.recordedTree(sid))
	}
	bases := map[string]bool{}
	clean, err := s.walkRuns(sid, files.metas, func(c ixCheckpoint, started []run) {
		c.bytes = files.bytes[c.id]
		bases[c.base] = true
		ix.add(ses, c, started)
	})
	if err != nil {
		return 0, false, err
	}
	for id := range files.entries {
		if slices.Contains(files.metas, id) || bases[id] {
			continue
		}
		// A create's manifest whose metadata never got written, or a
		// pruned checkpoint's whose metadata went first.
		if os.Remove(s.entriesPath(sid, id)) == nil {
			removed++
		}
	}
	return removed, clean, nil
}

// walkRuns reads the session's checkpoints ids, oldest first, and calls fn
// with each and the runs it starts. It returns false when one was damaged
// (fn gets it marked, with no run); an error reading one fails it.
func (s *Store) walkRuns(sid string, ids []string, fn func(ixCheckpoint, []run)) (bool, error) {
	clean := true
	state := map[string]*Entry{}
	prev := ""
	for _, id := range ids {
		c := ixCheckpoint{id: id}
		h, list, err := s.readEntries(s.entriesPath(sid, id))
		var started []run
		if err == nil {
			c.base = h.Base
			state, started, err = s.advance(sid, id, h, list, state, prev)
		}
		if err != nil && !errors.Is(err, errDamaged) && !berth.IsCode(err, berth.ENotFound) {
			return false, err
		}
		if err != nil {
			// Listed but unusable (a restore says so): it names nothing,
			// and the session's next checkpoint starts all its runs.
			c.damaged, clean, state, prev = true, false, map[string]*Entry{}, ""
			fn(c, nil)
			continue
		}
		fn(c, started)
		prev = id
	}
	return clean, nil
}

// advance returns the session's entries as of checkpoint id, given h and
// list (its manifest file) and state, its entries as of the checkpoint
// before it (prev, "" for none or a damaged one), and the runs id starts.
// state may be changed. errDamaged (or ENotFound) for a manifest that
// cannot be used.
func (s *Store) advance(sid, id string, h header, list []Entry, state map[string]*Entry, prev string) (map[string]*Entry, []run, error) {
	if h.Base != "" && h.Base == prev {
		// A delta on the checkpoint before: only what it lists changed.
		var changed []Entry
		for i := range list {
			if list[i].Kind != kindRemoved {
				changed = append(changed, list[i])
			}
		}
		started, err := runsOf(changed, state)
		if err != nil {
			return nil, nil, err
		}
		for i := range list {
			if e := &list[i]; e.Kind == kindRemoved {
				delete(state, e.Path)
			} else {
				state[e.Path] = e
			}
		}
		return state, started, nil
	}
	if h.Base != "" {
		// A delta on another: the whole chain read.
		byPath := map[string]Entry{}
		if _, err := s.resolve(sid, id, byPath, 0); err != nil {
			return nil, nil, err
		}
		list = slices.Collect(maps.Values(byPath))
	}
	next := make(map[string]*Entry, len(list))
	for i := range list {
		if list[i].Kind == kindRemoved {
			return nil, nil, errDamaged
		}
		next[list[i].Path] = &list[i]
	}
	started, err := runsOf(list, state)
	if err != nil {
		return nil, nil, err
	}
	return next, started, nil
}

// sweepBlobs removes the temporary blobs a crash left and, when every
// manifest could be read (clean), the blobs no tree of ix names. The
// caller holds gc exclusively.
func (s *Store) sweepBlobs(ix *index, clean bool) (int, error) {
	removed := 0
	prefixes, err := os.ReadDir(s.blobDir())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, berth.WrapError(berth.EInternal, err, "cannot sweep checkpoints")
	}
	for _, p := range prefixes {
		if strings.HasPrefix(p.Name(), tempPrefix) {
			// A capture's temporary blob: none is in flight while the
			// sweep holds gc, so it is one a crash left.
			if os.Remove(filepath.Join(s.blobDir(), p.Name())) == nil {
				removed++
			}
			continue
		}
		if !clean {
			continue
		}
		dir := filepath.Join(s.blobDir(), p.Name())
		blobs, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, b := range blobs {
			if k, ok := keyOf(b.Name()); ok && ix.blobs[k] > 0 {
				continue
			}
			if os.Remove(filepath.Join(dir, b.Name())) == nil {
				removed++
			}
		}
	}
	return removed, nil
}

// recordedTree returns the tree the session's directory names, the
// session itself when it names none (its checkpoints predate trees).
func (s *Store) recordedTree(sessionID string) string {
	b, err := os.ReadFile(filepath.Join(s.sessionDir(sessionID), treeFile))
	if err != nil || !ids.ValidName(string(b)) {
		return sessionID
	}
	return string(b)
}

// joinTree records, before the session's first checkpoint is written,
// that its checkpoints count in tree, and returns the tree recorded: a
// session's tree never changes. The caller holds the session's lock.
func (s *Store) joinTree(sessionID, tree string) (string, error) {
	s.mu.Lock()
	t, ok := s.trees[sessionID]
	s.mu.Unlock()
	if ok {
		return t, nil
	}
	p := filepath.Join(s.sessionDir(sessionID), treeFile)
	b, err := os.ReadFile(p)
	switch {
	case err == nil && ids.ValidName(string(b)):
		t = string(b)
	case err == nil || errors.Is(err, fs.ErrNotExist):
		if err := atomicfile.WriteFile(p, []byte(tree)); err != nil {
			return "", err
		}
		t = tree
	default:
		return "", err
	}
	s.mu.Lock()
	s.trees[sessionID] = t
	s.mu.Unlock()
	return t, nil
}
