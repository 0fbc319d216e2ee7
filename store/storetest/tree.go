package storetest

import (
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// child returns a session below parent in root's tree.
func child(id, parent, root string, depth, minute int) *berth.Session {
	s := newSession(id, base.Add(time.Duration(minute)*time.Minute))
	s.ParentID, s.RootID, s.Depth = parent, root, depth
	return s
}

// testTree: root_id and depth are kept, and ?root= lists a whole tree (its
// root included) while ?parent= lists one level.
func testTree(t *testing.T, open Opener) {
	s := fresh(t, open)
	create(t, s,
		newSession("r", base),
		child("a", "r", "r", 1, 1),
		child("b", "r", "r", 1, 2),
		child("a1", "a", "r", 2, 3),
		newSession("other", base.Add(4*time.Minute)),
		child("o1", "other", "other", 1, 5))
	got := get(t, s, "a1")
	if got.ParentID != "a" || got.RootID != "r" || got.Depth != 2 {
		t.Fatalf("a1 reads parent %q root %q depth %d", got.ParentID, got.RootID, got.Depth)
	}
	if r := get(t, s, "r"); r.RootID != "r" || r.Depth != 0 {
		t.Fatalf("root reads root %q depth %d", r.RootID, r.Depth)
	}
	for _, c := range []struct {
		f    berth.SessionFilter
		want string
	}{
		{berth.SessionFilter{Root: "r"}, "a1 b a r"},
		{berth.SessionFilter{Root: "a"}, ""},
		{berth.SessionFilter{Root: "other"}, "o1 other"},
		{berth.SessionFilter{Parent: "r"}, "b a"},
		{berth.SessionFilter{Root: "r", Parent: "a"}, "a1"},
	} {
		wantIDs(t, s, c.f, c.want)
	}
}

// testSpawnKeyUnique: one Idempotency-Key names one child of a parent; the
// same key under another parent is another child; the key and the body's
// digest read back, and the key finds its child.
func testSpawnKeyUnique(t *testing.T, open Opener) {
	s := fresh(t, open)
	first := child("k1", "p", "p", 1, 1)
	first.SpawnKey, first.SpawnHash = "key-1", "digest-1"
	create(t, s, newSession("p", base), newSession("q", base), first)
	dup := child("k2", "p", "p", 1, 2)
	dup.SpawnKey = "key-1"
	if err := s.CreateSession(ctx(t), dup); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("a second child of p with key-1: %v, want conflict", err)
	}
	if _, err := s.GetSession(ctx(t), "k2"); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("the refused child was stored: %v", err)
	}
	other := child("k3", "q", "q", 1, 3)
	other.SpawnKey = "key-1"
	create(t, s, other, child("k4", "p", "p", 1, 4), child("k5", "p", "p", 1, 5))
	got := get(t, s, "k1")
	if got.SpawnKey != "key-1" || got.SpawnHash != "digest-1" {
		t.Fatalf("spawn key %q digest %q read back", got.SpawnKey, got.SpawnHash)
	}
	page, err := s.ListSessions(ctx(t), berth.SessionFilter{Parent: "p", SpawnKey: "key-1"})
	if err != nil {
		t.Fatal(err)
	}
	if ids(page) != "k1" {
		t.Fatalf("key-1 under p finds %q", ids(page))
	}
}
