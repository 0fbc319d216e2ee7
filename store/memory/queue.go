package memory

import (
	"context"
	"slices"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// entryCopy returns a copy of a stored entry as the store gives it out.
func entryCopy(e *berth.QueueEntry) *berth.QueueEntry {
	c := *e
	c.Position = 0
	return &c
}

// EnqueuePrompt stores a copy of e as a pending entry, sets e.State to
// pending and says where it stands among the session's pending entries of
// its kind. A queue entry is refused with EQueueFull when the session
// already holds maxPending pending queue entries (so a maxPending of 0 or
// less refuses every one). A steer entry cancels the session's pending
// steer at once and names it in Replaced. EInvalid without an id or
// session, for an unknown kind or a time out of range; ENotFound if the
// session is absent; EConflict if an entry with that id exists (in any
// session). A refused entry changes nothing.
func (s *Store) EnqueuePrompt(ctx context.Context, e *berth.QueueEntry, maxPending int) (berth.EnqueueResult, error) {
	var res berth.EnqueueResult
	if err := codec.CheckQueueEntry(e); err != nil {
		return res, err
	}
	if _, ok := codec.ToNanos(e.CreatedAt); !ok && !e.CreatedAt.IsZero() {
		return res, berth.Errorf(berth.EInvalid, "queue entry created_at out of range")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(e.SessionID)
	if err != nil {
		return res, err
	}
	if err := s.fenced(e.SessionID); err != nil {
		return res, err
	}
	steer := -1 // the index in r.pending of the steer a new steer replaces
	pending := 0
	for i, p := range r.pending {
		if p.Kind == e.Kind {
			pending++
			if p.Kind == berth.EntrySteer {
				steer = i
			}
		}
	}
	if steer >= 0 {
		// The replaced steer no longer counts.
		pending--
	}
	if e.Kind == berth.EntryQueue && pending >= maxPending {
		return res, &berth.Error{Code: berth.EQueueFull,
			Message: "session " + e.SessionID + " has no room for another queued prompt",
			Details: map[string]any{"max_pending": maxPending}}
	}
	if _, ok := s.entryIDs[e.ID]; ok {
		return res, berth.Errorf(berth.EConflict, "queue entry %s already exists", e.ID)
	}
	if steer >= 0 {
		res.Replaced = r.pending[steer].ID
		r.pending = slices.Delete(r.pending, steer, steer+1)
	}
	stored := &berth.QueueEntry{ID: e.ID, SessionID: e.SessionID, Kind: e.Kind, Text: e.Text, Content: slices.Clone(e.Content),
		Generation: e.Generation, State: berth.EntryPending, TurnID: e.TurnID, CreatedAt: storedTime(e.CreatedAt)}
	r.pending = append(r.pending, stored)
	r.entries = append(r.entries, e.ID)
	s.entryIDs[e.ID] = e.SessionID
	// The new entry is the newest, so it comes after every pending one.
	res.Position = pending + 1
	e.State = berth.EntryPending
	return res, nil
}

// storedTime is t as the SQL stores give it back: in UTC, without a
// monotonic reading; the zero time stays zero.
func storedTime(t time.Time) time.Time {
	n, ok := codec.ToNanos(t)
	if !ok {
		return time.Time{}
	}
	return codec.FromNanos(n)
}

// ListQueue returns a session's pending entries in arrival order, each
// with its 1-based Position among the pending entries of its kind.
// ENotFound if the session is absent.
func (s *Store) ListQueue(ctx context.Context, sessionID string) ([]*berth.QueueEntry, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, err := s.lookup(sessionID)
	if err != nil {
		return nil, err
	}
	out := make([]*berth.QueueEntry, 0, len(r.pending))
	seen := map[string]int{}
	for _, p := range r.pending {
		e := entryCopy(p)
		seen[e.Kind]++
		e.Position = seen[e.Kind]
		out = append(out, e)
	}
	return out, nil
}

// ClaimQueueEntry moves the oldest pending entry of kind and generation to
// dispatched, records turnID on it and returns it. ENotFound when there is
// none (or the session is absent): an entry is claimed at most once.
func (s *Store) ClaimQueueEntry(ctx context.Context, sessionID, kind string, generation int64, turnID string) (*berth.QueueEntry, error) {
	e, err := s.takePending(sessionID, func(p *berth.QueueEntry) bool { return p.Kind == kind && p.Generation == generation })
	switch {
	case err != nil:
		return nil, err
	case e == nil:
		return nil, berth.Errorf(berth.ENotFound, "session %s has no pending %s entry of generation %d", sessionID, kind, generation)
	}
	e.State, e.TurnID = berth.EntryDispatched, turnID
	return e, nil
}

// CancelQueueEntry moves one pending entry to canceled and returns it.
// ENotFound if the session has no pending entry with that id.
func (s *Store) CancelQueueEntry(ctx context.Context, sessionID, entryID string) (*berth.QueueEntry, error) {
	e, err := s.takePending(sessionID, func(p *berth.QueueEntry) bool { return p.ID == entryID })
	switch {
	case err != nil:
		return nil, err
	case e == nil:
		return nil, berth.Errorf(berth.ENotFound, "session %s has no pending entry %s", sessionID, entryID)
	}
	e.State = berth.EntryCanceled
	return e, nil
}

// takePending removes from session sessionID's pending entries the oldest
// that match matches and returns a copy of it; none when there is no such
// entry (or no such session). A fenced store's refusal is its error.
func (s *Store) takePending(sessionID string, match func(*berth.QueueEntry) bool) (*berth.QueueEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(sessionID); err != nil {
		return nil, err
	}
	r, ok := s.sessions[sessionID]
	if !ok {
		return nil, nil
	}
	i := slices.IndexFunc(r.pending, match)
	if i < 0 {
		return nil, nil
	}
	e := entryCopy(r.pending[i])
	r.pending = slices.Delete(r.pending, i, i+1)
	return e, nil
}

// CancelQueue moves every pending entry of the session of a generation
// older than generation (every pending entry when generation is 0) to
// canceled and returns them in arrival order. A session that is absent has
// none.
func (s *Store) CancelQueue(ctx context.Context, sessionID string, generation int64) ([]*berth.QueueEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(sessionID); err != nil {
		return nil, err
	}
	out := []*berth.QueueEntry{}
	r, ok := s.sessions[sessionID]
	if !ok {
		return out, nil
	}
	keep := r.pending[:0]
	for _, p := range r.pending {
		if generation == 0 || p.Generation < generation {
			e := entryCopy(p)
			e.State = berth.EntryCanceled
			out = append(out, e)
			continue
		}
		keep = append(keep, p)
	}
	clear(r.pending[len(keep):])
	r.pending = keep
	return out, nil
}
