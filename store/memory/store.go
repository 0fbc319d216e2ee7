// Package memory implements berth.Store in the daemon's memory, for tests
// and throwaway runs (berth serve --store memory:).
//
// Nothing is written anywhere: everything the store holds is lost when the
// process exits, and nothing but memory bounds it (a long run with chatty
// agents grows until the daemon is restarted). It keeps the semantics of
// the SQLite store exactly, and passes the same conformance suite
// (store/storetest).
//
// One sync.RWMutex guards all of the state: writes take it exclusively,
// reads share it, so every method is atomic and a multi-step write (an
// AppendEvents across sessions, a steer replacing a steer) is all or
// nothing. Values go in and out as copies, so a caller can never change
// what the store holds by keeping a pointer.
package memory

import (
	"crypto/sha256"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/credtable"
	"github.com/berth-sh/berth/store/internal/fence"
)

// Name is the backend name Store.Name reports.
const Name = "memory"

// Store is a berth.Store held in memory. It is safe for concurrent use.
type Store struct {
	*state
	// fence is this value's own: set by Fence (node.go).
	fence fence.Book
}

// state is everything a store holds; a test reopens it under a new Store.
type state struct {
	mu       sync.RWMutex
	sessions map[string]*session
	// order holds every session sorted as lists show them: created_at,
	// then id, descending.
	order []*session
	// spawnKeys maps parent id + "\x00" + spawn key to a child's id.
	spawnKeys map[string]string
	// entryIDs and permIDs map every queue entry's and permission's id to
	// its session: ids are unique in the whole store.
	entryIDs map[string]string
	permIDs  map[string]string
	// elicIDs maps every elicitation's id to its session.
	elicIDs map[string]string
	// tokens counts the leases handed out: a new holder gets the next.
	tokens int64
	// nodes is the node registry, by id.
	nodes map[string]*node

	hooks hookState
	// signins are the browser sign-ins, by the hash of their id.
	signins map[[sha256.Size]byte]berth.SignIn
	// The credentials: their methods are the store's (berth.CredentialStore),
	// kept in the daemon's memory only, like everything of this store.
	*credentials
}

// credentials is the credential table, embedded by an unexported name so
// that only its berth.CredentialStore methods show on Store.
type credentials = credtable.Table

var _ berth.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{state: newState()}
}

// newState returns an empty state.
func newState() *state {
	return &state{
		sessions:    map[string]*session{},
		spawnKeys:   map[string]string{},
		entryIDs:    map[string]string{},
		permIDs:     map[string]string{},
		elicIDs:     map[string]string{},
		nodes:       map[string]*node{},
		hooks:       newHookState(),
		signins:     map[[sha256.Size]byte]berth.SignIn{},
		credentials: credtable.New(nil),
	}
}

// Name reports "memory".
func (s *Store) Name() string { return Name }

// Close does nothing: the store's data lives until the process ends, and
// goes with it.
func (s *Store) Close() error { return nil }
