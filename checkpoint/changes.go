package checkpoint

import (
	"path"
	"slices"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// Changes is a checkpoint as ChangesAfter read it: whole, or as the
// changes since the checkpoint read before it.
type Changes struct {
	Meta *Checkpoint
	// Whole is every entry, sorted by path, when the checkpoint was read
	// whole: there was none before it, or its chain of deltas does not
	// pass through that one. nil otherwise.
	Whole []Entry
	// Changed are the entries added or changed since the one before,
	// sorted by path; Removed the paths gone, sorted.
	Changed []Entry
	Removed []string
}

// Resolved is a checkpoint's entries as ChangesAfter read them, given to
// the next call, which takes them over: they are not valid after it.
type Resolved struct {
	id     string
	byPath map[string]Entry
}

// ChangesAfter reads the session's checkpoint id as the changes since
// prev (nil: none), the checkpoint read before it, for a reader of a
// session's checkpoints one after another (the object store's Syncer): a
// chain of deltas that passes through prev is read down to it alone, not
// to a full manifest, and only the entries it changes are checked (with
// what they change: a directory gone must take its paths with it).
// Otherwise the checkpoint is read whole. Either way what it gives
// applied to prev is exactly what Entries gives. It returns id's entries
// for the next call. ENotFound.
func (s *Store) ChangesAfter(sessionID, id string, prev *Resolved) (Changes, *Resolved, error) {
	if !ids.ValidName(sessionID) {
		return Changes{}, nil, berth.Errorf(berth.EInvalid, "invalid session id")
	}
	defer s.lockSession(sessionID)()
	if prev != nil && prev.byPath != nil {
		ch, r, through, err := s.changesSince(sessionID, id, prev)
		if err != nil || through {
			return ch, r, err
		}
	}
	m, err := s.readManifest(sessionID, id)
	if err != nil {
		return Changes{}, nil, err
	}
	byPath := make(map[string]Entry, len(m.entries))
	for _, e := range m.entries {
		byPath[e.Path] = e
	}
	return Changes{Meta: m.meta, Whole: m.entries}, &Resolved{id: id, byPath: byPath}, nil
}

// changesSince reads checkpoint id as the deltas of its chain above prev;
// false when the chain reaches a full manifest first.
func (s *Store) changesSince(sessionID, id string, prev *Resolved) (Changes, *Resolved, bool, error) {
	if !ids.Valid(idPrefix, id) {
		return Changes{}, nil, false, berth.Errorf(berth.ENotFound, "no checkpoint %s", id)
	}
	meta, err := s.readMeta(sessionID, id)
	if err != nil {
		return Changes{}, nil, false, err
	}
	var deltas [][]Entry
	for at := id; at != prev.id; {
		if len(deltas) > maxChain || !ids.Valid(idPrefix, at) {
			return Changes{}, nil, false, berth.WrapError(berth.EInternal, errDamaged, "checkpoint %s has a broken chain", id)
		}
		h, entries, err := s.readEntries(s.entriesPath(sessionID, at))
		if err != nil {
			return Changes{}, nil, false, err
		}
		if h.Base == "" {
			return Changes{}, nil, false, nil
		}
		deltas = append(deltas, entries)
		at = h.Base
	}
	// The deltas apply oldest first: the later's entry of a path wins.
	next := map[string]Entry{}
	for _, d := range slices.Backward(deltas) {
		for _, e := range d {
			next[e.Path] = e
		}
	}
	ch := Changes{Meta: meta, Changed: []Entry{}}
	for p, e := range next {
		old, had := prev.byPath[p]
		switch {
		case e.Kind == kindRemoved:
			if had {
				ch.Removed = append(ch.Removed, p)
			} else {
				delete(next, p)
			}
		case had && old == e:
			delete(next, p)
		default:
			ch.Changed = append(ch.Changed, e)
		}
	}
	slices.SortFunc(ch.Changed, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	slices.Sort(ch.Removed)
	if err := checkChanges(id, prev.byPath, next); err != nil {
		return Changes{}, nil, false, err
	}
	byPath := prev.byPath
	prev.byPath = nil
	for p, e := range next {
		if e.Kind == kindRemoved {
			delete(byPath, p)
		} else {
			byPath[p] = e
		}
	}
	return ch, &Resolved{id: id, byPath: byPath}, true, nil
}

// checkChanges checks, as checkEntries checks a whole manifest, the
// entries of checkpoint id that next (by path; kindRemoved: gone) changes
// in was: each changed entry's path and content, and that each is below a
// directory; where a directory goes (removed, or another kind now), that
// no path is left below it. EInternal when one fails.
func checkChanges(id string, was, next map[string]Entry) error {
	// now is a path's entry once next applies.
	now := func(p string) (Entry, bool) {
		if e, ok := next[p]; ok {
			return e, e.Kind != kindRemoved
		}
		e, ok := was[p]
		return e, ok
	}
	dirGone := false
	for p, e := range next {
		if old, ok := was[p]; ok && old.Kind == KindDir && e.Kind != KindDir {
			dirGone = true
		}
		if e.Kind == kindRemoved {
			continue
		}
		if !validEntryPath(p) {
			return berth.Errorf(berth.EInternal, "checkpoint %s has a bad path", id)
		}
		if err := checkEntry(id, &e); err != nil {
			return err
		}
		if dir := path.Dir(p); dir != "." {
			if d, ok := now(dir); !ok || d.Kind != KindDir {
				return berth.Errorf(berth.EInternal, "checkpoint %s has a path outside its directories", id)
			}
		}
	}
	if !dirGone {
		return nil
	}
	// Rare (a directory removed): every path left must still be below one.
	for p := range was {
		if _, ok := now(p); !ok {
			continue
		}
		if dir := path.Dir(p); dir != "." {
			if d, ok := now(dir); !ok || d.Kind != KindDir {
				return berth.Errorf(berth.EInternal, "checkpoint %s has a path outside its directories", id)
			}
		}
	}
	return nil
}
