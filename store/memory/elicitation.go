package memory

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// storedElicitation is an elicitation as the SQL stores keep it: its
// state beside its JSON document, so that what is read back is a copy.
type storedElicitation struct {
	id, state string
	doc       string
}

// CreateElicitation stores an elicitation; an empty State is stored (and
// set on e) as pending. EInvalid without an id or session or for a schema
// that is not JSON; ENotFound if the session is absent; EConflict if an
// elicitation with that id exists (in any session).
func (s *Store) CreateElicitation(ctx context.Context, e *berth.Elicitation) error {
	c, doc, err := codec.NewElicitation(e)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(e.SessionID)
	if err != nil {
		return err
	}
	if err := s.fenced(e.SessionID); err != nil {
		return err
	}
	if _, ok := s.elicIDs[e.ID]; ok {
		return berth.Errorf(berth.EConflict, "elicitation %s already exists", e.ID)
	}
	r.elics = append(r.elics, &storedElicitation{id: c.ID, state: c.State, doc: doc})
	s.elicIDs[e.ID] = e.SessionID
	e.State = c.State
	return nil
}

// elicitation returns the stored elicitation id of a session, nil if there
// is none.
func (st *state) elicitation(sessionID, id string) *storedElicitation {
	r, ok := st.sessions[sessionID]
	if !ok {
		return nil
	}
	for _, e := range r.elics {
		if e.id == id {
			return e
		}
	}
	return nil
}

// GetElicitation returns a copy of one elicitation of a session. ENotFound
// if the session is absent or has no elicitation with that id.
func (s *Store) GetElicitation(ctx context.Context, sessionID, id string) (*berth.Elicitation, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.elicitation(sessionID, id)
	if e == nil {
		return nil, berth.Errorf(berth.ENotFound, "session %s has no elicitation %s", sessionID, id)
	}
	return codec.DecodeElicitation([]byte(e.doc))
}

// ListElicitations returns copies of a session's elicitations in state
// (all of them when state is empty) in the order they were created.
// ENotFound if the session is absent.
func (s *Store) ListElicitations(ctx context.Context, sessionID, state string) ([]*berth.Elicitation, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, err := s.lookup(sessionID)
	if err != nil {
		return nil, err
	}
	out := []*berth.Elicitation{}
	for _, st := range r.elics {
		if state != "" && st.state != state {
			continue
		}
		e, err := codec.DecodeElicitation([]byte(st.doc))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// ResolveElicitation records e's State, Action, Content, DecidedBy and
// ResolvedAt on a pending elicitation. EInvalid without ids or when
// e.State is empty or pending; ENotFound if absent; EConflict if it is no
// longer pending.
func (s *Store) ResolveElicitation(ctx context.Context, e *berth.Elicitation) error {
	if err := codec.CheckResolution(e); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fenced(e.SessionID); err != nil {
		return err
	}
	st := s.elicitation(e.SessionID, e.ID)
	switch {
	case st == nil:
		return berth.Errorf(berth.ENotFound, "session %s has no elicitation %s", e.SessionID, e.ID)
	case st.state != berth.ElicitationPending:
		return codec.ResolvedConflict(e.ID, st.state)
	}
	doc, err := codec.Resolved([]byte(st.doc), e)
	if err != nil {
		return err
	}
	st.state, st.doc = e.State, doc
	return nil
}
