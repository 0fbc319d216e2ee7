// Package credtable is the credentials of a store held in memory
// (berth.CredentialStore): the memory store's whole table, and the SQLite
// store's copy of its credentials file, which a Table writes through on
// every change.
package credtable

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/berth-sh/berth"
)

// Entry is one credential with its value.
type Entry struct {
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	Value      []byte     `json:"value"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// Backing is where a Table keeps its entries beyond memory.
type Backing interface {
	// Load returns the entries kept; it is called before the first use
	// and again after a failure, until it succeeds.
	Load() ([]Entry, error)
	// Save keeps entries, replacing what was kept, whole or not at all.
	Save(entries []Entry) error
}

// Table is a berth.CredentialStore in memory, written through to a
// Backing when it has one. It is safe for concurrent use.
type Table struct {
	backing Backing
	now     func() time.Time

	mu      sync.Mutex
	loaded  bool
	entries map[string]*Entry
}

// New returns a table kept in backing (nil: in memory only).
func New(backing Backing) *Table {
	return &Table{backing: backing, now: time.Now, entries: map[string]*Entry{}}
}

// load reads the backing once. t.mu is held.
func (t *Table) load() error {
	if t.loaded || t.backing == nil {
		return nil
	}
	list, err := t.backing.Load()
	if err != nil {
		return err
	}
	for i := range list {
		t.entries[list[i].Name] = &list[i]
	}
	t.loaded = true
	return nil
}

// save writes every entry to the backing. t.mu is held.
func (t *Table) save() error {
	if t.backing == nil {
		return nil
	}
	list := make([]Entry, 0, len(t.entries))
	for _, name := range slices.Sorted(maps.Keys(t.entries)) {
		list = append(list, *t.entries[name])
	}
	return t.backing.Save(list)
}

// PutCredential implements berth.CredentialStore.
func (t *Table) PutCredential(_ context.Context, name, kind string, value []byte) error {
	kind, err := berth.CheckCredential(name, kind, value)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.load(); err != nil {
		return err
	}
	old := t.entries[name]
	t.entries[name] = &Entry{Name: name, Kind: kind, Value: slices.Clone(value), CreatedAt: t.now().UTC()}
	if err := t.save(); err != nil {
		// Nothing is half-written: memory keeps what the backing keeps.
		if old != nil {
			t.entries[name] = old
		} else {
			delete(t.entries, name)
		}
		return err
	}
	return nil
}

// CredentialValue implements berth.CredentialStore. A use is recorded in
// memory at once and in the backing at most once per
// berth.CredentialTouchInterval; a failure to record it does not fail
// the read.
func (t *Table) CredentialValue(_ context.Context, name string) ([]byte, error) {
	if err := berth.ValidateCredentialName(name); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.load(); err != nil {
		return nil, err
	}
	e, ok := t.entries[name]
	if !ok {
		return nil, berth.CredentialNotSet(name)
	}
	now := t.now().UTC()
	if e.LastUsedAt == nil || now.Sub(*e.LastUsedAt) >= berth.CredentialTouchInterval {
		e.LastUsedAt = &now
		_ = t.save()
	}
	return slices.Clone(e.Value), nil
}

// ListCredentials implements berth.CredentialStore.
func (t *Table) ListCredentials(context.Context) ([]berth.Credential, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.load(); err != nil {
		return nil, err
	}
	out := make([]berth.Credential, 0, len(t.entries))
	for _, name := range slices.Sorted(maps.Keys(t.entries)) {
		e := t.entries[name]
		c := berth.Credential{Name: e.Name, Kind: e.Kind, CreatedAt: e.CreatedAt}
		if e.LastUsedAt != nil {
			at := *e.LastUsedAt
			c.LastUsedAt = &at
		}
		out = append(out, c)
	}
	return out, nil
}

// DeleteCredential implements berth.CredentialStore.
func (t *Table) DeleteCredential(_ context.Context, name string) error {
	if err := berth.ValidateCredentialName(name); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.load(); err != nil {
		return err
	}
	old, ok := t.entries[name]
	if !ok {
		return berth.CredentialNotSet(name)
	}
	delete(t.entries, name)
	if err := t.save(); err != nil {
		t.entries[name] = old
		return err
	}
	return nil
}
