package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/objstore"
	"github.com/berth-sh/berth/store/memory"
)

// The object store's Restorer makes a moving session's directories
// afresh (a file an earlier stay on this node left is gone, HOME is
// private); a session the store never had starts empty, while one the
// store had and lost is an error that leaves the session where it was.
func TestRestorerMakesTheDirectoriesAfresh(t *testing.T) {
	s3 := testenv.S3Server(t)
	ctx := testenv.Context(t)
	c, err := objstore.Open(objstore.Config{URL: s3.URL, Environ: s3.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBucket(ctx); err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	now := time.Now().UTC()
	if err := st.CreateSession(context.Background(), &berth.Session{ID: "ses_moved", RootID: "ses_moved", Agent: "demo",
		State: berth.StateStopped, ManagedWorkspace: true, Labels: map[string]string{}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	r := objRestorer{c: c, store: st, log: slog.New(slog.DiscardHandler)}
	dir := t.TempDir()
	ws, home := filepath.Join(dir, "workspaces", "ses_moved"), filepath.Join(dir, "sessions", "ses_moved", "home")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "stale.txt"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(ctx, "ses_moved", ws, home); err != nil {
		t.Fatalf("a session the store never had: %v", err)
	}
	for d, mode := range map[string]os.FileMode{ws: 0o755, home: 0o700} {
		ents, err := os.ReadDir(d)
		fi, serr := os.Stat(d)
		if err != nil || serr != nil || len(ents) != 0 || fi.Mode().Perm() != mode {
			t.Fatalf("%s after the restore: %d entries %v %v", d, len(ents), err, fi)
		}
	}
	if err := st.SetStorageSynced(context.Background(), "ses_moved", 7, now); err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(ctx, "ses_moved", ws, home); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("a session the store had and lost: %v", err)
	}
}
