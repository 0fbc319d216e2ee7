package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A workspace that contains a hidden path (the daemon's home, with its
// token) is archived without it, a hidden file too, and a symbolic link
// to it stays a link: nothing of the home reaches the archive, so none
// reaches a workspace restored from it. The rest is archived as before.
func TestCreateLeavesOutHiddenPaths(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	home := filepath.Join(ws, "a", "bhome")
	must(t, os.MkdirAll(filepath.Join(home, "sessions"), 0o700))
	must(t, os.WriteFile(filepath.Join(home, "token"), []byte("tok-s3cret"), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "api.db"), []byte("db"), 0o600))
	must(t, os.WriteFile(filepath.Join(ws, "a", "keep.txt"), []byte("keep"), 0o600))
	must(t, os.Symlink("a/bhome", filepath.Join(ws, "home-link")))

	s := New(filepath.Join(home, "snapshots"))
	snap, err := s.Create(ctx, "ses_1", ws, home, filepath.Join(ws, "api.db"), filepath.Join(ws, "not-there"))
	must(t, err)
	dst := filepath.Join(t.TempDir(), "restored")
	must(t, s.Restore(ctx, snap.ID, dst))
	got := readTree(t, dst)
	for _, name := range []string{"a/bhome", "a/bhome/token", "a/bhome/sessions", "a/bhome/snapshots", "api.db"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s was archived", name)
		}
	}
	if _, err := os.ReadFile(filepath.Join(dst, "home-link", "token")); err == nil {
		t.Error("the token is readable in the restored workspace")
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a", "keep.txt")); err != nil || string(b) != "keep" {
		t.Errorf("keep.txt = %q, %v", b, err)
	}
	if snap.Skipped != 2 {
		t.Errorf("Skipped = %d, want 2 (the home and the database)", snap.Skipped)
	}
}
