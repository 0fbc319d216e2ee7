package snapshot

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func TestListGetDelete(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	writeFile(t, ws, "a.txt", "a", 0o644, time.Now())
	dir := t.TempDir()
	s := New(dir)

	var made []*Snapshot
	for range 3 {
		snap, err := s.Create(ctx, "ses_a", ws)
		must(t, err)
		made = append(made, snap)
	}
	other, err := s.Create(ctx, "ses_b", ws)
	must(t, err)

	list, err := s.List(ctx, "ses_a")
	must(t, err)
	want := slices.Clone(made)
	slices.Reverse(want)
	if !reflect.DeepEqual(list, want) {
		t.Errorf("List = %v, want newest first %v", list, want)
	}
	for _, snap := range append(made, other) {
		got, err := s.Get(ctx, snap.ID)
		must(t, err)
		if !reflect.DeepEqual(got, snap) {
			t.Errorf("Get(%s) = %+v, want %+v", snap.ID, got, snap)
		}
	}

	// Leftovers of a crash are not snapshots.
	must(t, os.WriteFile(filepath.Join(dir, "ses_a", ".tmp-123.tar.zst"), []byte("partial"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "ses_a", ".tmp-456"), []byte("{"), 0o600))
	if list, err := s.List(ctx, "ses_a"); err != nil || len(list) != 3 {
		t.Errorf("List with leftovers = %d snapshots, %v", len(list), err)
	}

	if list, err := s.List(ctx, "ses_none"); err != nil || list == nil || len(list) != 0 {
		t.Errorf("List of a session without snapshots = %#v, %v", list, err)
	}
	if _, err := s.Get(ctx, "snap_01jzzzzzzzzzzzzzzzzzzzzzzz"); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("Get of an unknown id: %v", err)
	}
	for _, id := range []string{"", "snap_", "../ses_a/x", "snap_01JZZZZZZZZZZZZZZZZZZZZZZZ", "ses_01jzzzzzzzzzzzzzzzzzzzzzzz"} {
		if _, err := s.Get(ctx, id); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("Get(%q): %v, want %s", id, err, berth.EInvalid)
		}
		if err := s.Restore(ctx, id, t.TempDir()); !berth.IsCode(err, berth.EInvalid) {
			t.Errorf("Restore(%q): %v, want %s", id, err, berth.EInvalid)
		}
	}
	if _, err := s.List(ctx, "../x"); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("List(../x): %v", err)
	}
	if err := s.Delete(".."); !berth.IsCode(err, berth.EInvalid) {
		t.Errorf("Delete(..): %v", err)
	}

	must(t, s.Delete("ses_a"))
	if list, err := s.List(ctx, "ses_a"); err != nil || len(list) != 0 {
		t.Errorf("List after Delete = %v, %v", list, err)
	}
	if _, err := s.Get(ctx, made[0].ID); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("Get after Delete: %v", err)
	}
	if err := s.Restore(ctx, made[0].ID, filepath.Join(t.TempDir(), "dst")); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("Restore after Delete: %v", err)
	}
	if _, err := s.Get(ctx, other.ID); err != nil {
		t.Errorf("Delete removed another session's snapshot: %v", err)
	}
	must(t, s.Delete("ses_a")) // again: nothing to delete

	if _, err := New(filepath.Join(t.TempDir(), "none")).Get(ctx, other.ID); !berth.IsCode(err, berth.ENotFound) {
		t.Errorf("Get in a store never written: %v", err)
	}
}

func TestSnapshotJSON(t *testing.T) {
	b, err := json.Marshal(Snapshot{ID: "snap_x", SessionID: "ses_x", SizeBytes: 1, Files: 2, CreatedAt: time.Unix(0, 0).UTC()})
	must(t, err)
	want := `{"id":"snap_x","session_id":"ses_x","size_bytes":1,"files":2,"created_at":"1970-01-01T00:00:00Z"}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
}
