package memory

import (
	"context"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// session is one stored session: its document (the whole berth.Session as
// the SQL stores encode it, so a field added to berth.Session is kept with
// no change here), the columns lists filter on, and what hangs off it.
type session struct {
	id  string
	doc []byte
	// lastSeq and agentOffset are moved only by AppendEvents.
	lastSeq, agentOffset int64
	// usage is moved only by AddUsage (usage.go).
	usage codec.UsageRow
	// storageSeq and storageAt are moved only by SetStorageSynced.
	storageSeq, storageAt int64
	// The filter columns. root and spawnKey are set at creation and never
	// change, as in the SQL stores.
	state          berth.State
	agent, parent  string
	root, spawnKey string
	createdAt      int64 // codec.SortNanos of CreatedAt
	labels         map[string]string
	// spawnIdx is the session's key in state.spawnKeys ("" for none).
	spawnIdx string
	log      eventLog
	// entries are the ids of every queue entry of the session; pending
	// holds its pending entries, oldest first.
	entries []string
	pending []*berth.QueueEntry
	perms   []*berth.Permission  // oldest first
	elics   []*storedElicitation // oldest first
	lease   *berth.Lease
	// leaseInc is the incarnation of the node that took the lease.
	leaseInc int64
}

// before reports whether a comes before b in a list: newer first, then
// the larger id.
func before(a, b *session) bool {
	if a.createdAt != b.createdAt {
		return a.createdAt > b.createdAt
	}
	return a.id > b.id
}

// decode returns a fresh copy of the stored session.
func (r *session) decode() (*berth.Session, error) {
	s, err := codec.DecodeSession(r.doc, r.lastSeq, r.agentOffset)
	if err != nil {
		return nil, err
	}
	s.Usage = r.usage.Usage()
	return s, nil
}

// place returns the index in order where r is or would go.
func (st *state) place(r *session) int {
	return sort.Search(len(st.order), func(i int) bool { return !before(st.order[i], r) })
}

// insertOrder puts r in order.
func (st *state) insertOrder(r *session) {
	st.order = slices.Insert(st.order, st.place(r), r)
}

// removeOrder takes r out of order.
func (st *state) removeOrder(r *session) {
	if i := st.place(r); i < len(st.order) && st.order[i] == r {
		st.order = slices.Delete(st.order, i, i+1)
	}
}

// spawnKeyOf is the key of a child in spawnKeys, "" when it has no key.
func spawnKeyOf(parent, key string) string {
	if key == "" {
		return ""
	}
	return parent + "\x00" + key
}

// CreateSession inserts a copy of sess. EInvalid without an id or for a
// session that cannot be encoded; EConflict if the id exists or a child of
// the same parent holds the same spawn key.
func (s *Store) CreateSession(ctx context.Context, sess *berth.Session) error {
	doc, err := codec.EncodeSession(sess)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sessions[sess.ID]; ok {
		return berth.Errorf(berth.EConflict, "session %s already exists", sess.ID)
	}
	key := spawnKeyOf(sess.ParentID, sess.SpawnKey)
	if _, ok := s.spawnKeys[key]; ok && key != "" {
		return berth.Errorf(berth.EConflict, "session %s already exists: parent %s has a child with spawn key %q",
			sess.ID, sess.ParentID, sess.SpawnKey)
	}
	r := &session{id: sess.ID, doc: []byte(doc), state: sess.State, agent: sess.Agent, parent: sess.ParentID,
		root: codec.RootOf(sess), spawnKey: sess.SpawnKey, createdAt: codec.SortNanos(sess.CreatedAt),
		labels: maps.Clone(sess.Labels), spawnIdx: key, log: newEventLog()}
	s.sessions[r.id] = r
	if key != "" {
		s.spawnKeys[key] = r.id
	}
	s.insertOrder(r)
	return nil
}

// GetSession returns a copy of one session. ENotFound if there is none.
func (s *Store) GetSession(ctx context.Context, id string) (*berth.Session, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.sessions[id]
	if !ok {
		return nil, berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	sess, err := r.decode()
	if err != nil {
		return nil, err
	}
	sess.Storage = codec.StorageSync(r.storageSeq, r.storageAt)
	return sess, nil
}

// SetStorageSynced implements berth.SessionStore: forward only.
func (s *Store) SetStorageSynced(ctx context.Context, id string, seq int64, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[id]
	if !ok {
		return berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	if seq > r.storageSeq {
		r.storageSeq, r.storageAt = seq, codec.SortNanos(at)
	}
	return nil
}

// matches reports whether r passes every filter of f but the cursor.
func (r *session) matches(f *berth.SessionFilter) bool {
	switch {
	case f.State != "" && r.state != f.State,
		f.Agent != "" && r.agent != f.Agent,
		f.Parent != "" && r.parent != f.Parent,
		f.Root != "" && r.root != f.Root,
		f.SpawnKey != "" && r.spawnKey != f.SpawnKey:
		return false
	}
	for k, v := range f.Labels {
		if got, ok := r.labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ListSessions returns a page of sessions, newest first (created_at, then
// id, descending), that match every given filter. Limit 0 means 50 and is
// capped at 1000. EInvalid for a malformed cursor or a negative limit.
func (s *Store) ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error) {
	limit, err := codec.SessionLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	start := 0
	if f.Cursor != "" {
		at, id, err := codec.DecodeCursor(f.Cursor)
		if err != nil {
			return nil, err
		}
		// The first session after the cursor's position.
		start = sort.Search(len(s.order), func(i int) bool {
			r := s.order[i]
			return r.createdAt < at || (r.createdAt == at && r.id < id)
		})
	}
	page := &berth.SessionPage{Sessions: make([]*berth.Session, 0, min(limit, 64))}
	var last *session
	for _, r := range s.order[start:] {
		if !r.matches(&f) {
			continue
		}
		if len(page.Sessions) == limit {
			page.NextCursor = codec.EncodeCursor(last.createdAt, last.id)
			break
		}
		sess, err := r.decode()
		if err != nil {
			return nil, err
		}
		page.Sessions = append(page.Sessions, sess)
		last = r
	}
	return page, nil
}

// UpdateSession writes every field of sess except LastSeq and AgentOffset,
// which only AppendEvents moves. When from is not empty the stored state
// must equal it (EConflict otherwise). ENotFound if the session is absent.
func (s *Store) UpdateSession(ctx context.Context, sess *berth.Session, from berth.State) error {
	doc, err := codec.EncodeSession(sess)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[sess.ID]
	if !ok {
		return berth.Errorf(berth.ENotFound, "session %s not found", sess.ID)
	}
	if from != "" && r.state != from {
		return codec.StateConflict(sess.ID, r.state, from)
	}
	// After the guard, as the postgres store checks it.
	if err := s.fenced(sess.ID); err != nil {
		return err
	}
	// A new created_at moves the session in the list order.
	s.removeOrder(r)
	r.doc, r.state, r.agent, r.parent = []byte(doc), sess.State, sess.Agent, sess.ParentID
	r.createdAt = codec.SortNanos(sess.CreatedAt)
	r.labels = maps.Clone(sess.Labels)
	s.insertOrder(r)
	return nil
}

// DeleteSession removes a session, its labels, its whole log, its queue
// entries, permissions and lease. ENotFound if absent.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[id]
	if !ok {
		return berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	s.removeOrder(r)
	delete(s.sessions, id)
	if r.spawnIdx != "" {
		delete(s.spawnKeys, r.spawnIdx)
	}
	// Entry and permission ids of the session are free again, as when the
	// SQL stores delete their rows.
	for _, eid := range r.entries {
		delete(s.entryIDs, eid)
	}
	for _, p := range r.perms {
		delete(s.permIDs, p.ID)
	}
	for _, e := range r.elics {
		delete(s.elicIDs, e.id)
	}
	s.fence.Dropped(id)
	return nil
}

// lookup returns the session id names. ENotFound if it is absent.
func (st *state) lookup(id string) (*session, error) {
	r, ok := st.sessions[id]
	if !ok {
		return nil, berth.Errorf(berth.ENotFound, "session %s not found", id)
	}
	return r, nil
}
