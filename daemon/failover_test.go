package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/objstore"
	"github.com/berth-sh/berth/store/memory"
)

// openS3 is a client of the test S3 server, its bucket made.
func openS3(t *testing.T) *objstore.Client {
	t.Helper()
	s3 := testenv.S3Server(t)
	c, err := objstore.Open(objstore.Config{URL: s3.URL, Environ: s3.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBucket(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

// The object store's Restorer makes a moving session's directories
// afresh (a file an earlier stay on this node left is gone, HOME is
// private); a session the store never had starts empty, while one the
// store had and lost is an error that leaves the session where it was.
func TestRestorerMakesTheDirectoriesAfresh(t *testing.T) {
	ctx := testenv.Context(t)
	c := openS3(t)
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

// A child moving with its root gets its HOME alone (workspace ""): its
// workspace is its root's, restored with the root, and nothing is made
// or cleared for it.
func TestRestorerGivesAChildItsHomeAlone(t *testing.T) {
	ctx := testenv.Context(t)
	c := openS3(t)
	st := memory.New()
	now := time.Now().UTC()
	if err := st.CreateSession(context.Background(), &berth.Session{ID: "ses_kid", ParentID: "ses_root", RootID: "ses_root", Depth: 1,
		Agent: "demo", State: berth.StateStopped, Labels: map[string]string{}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	r := objRestorer{c: c, store: st, log: slog.New(slog.DiscardHandler)}
	home := filepath.Join(t.TempDir(), "sessions", "ses_kid", "home")
	testenv.WriteFile(t, filepath.Join(home, "stale.txt"), "old", 0o600)
	if err := r.Restore(ctx, "ses_kid", "", home); err != nil {
		t.Fatalf("a child's HOME alone: %v", err)
	}
	ents, err := os.ReadDir(home)
	fi, serr := os.Stat(home)
	if err != nil || serr != nil || len(ents) != 0 || fi.Mode().Perm() != 0o700 {
		t.Fatalf("HOME after the restore: %d entries %v %v", len(ents), err, fi)
	}
}

// A session that moves here gets its checkpoints too, in its root's tree:
// a rewind to a turn before the move has its files. A checkpoint that
// does not come (damaged in the store) does not stop the move: the others
// come, and the session is told why in a runtime_warning.
func TestRestorerBringsTheCheckpoints(t *testing.T) {
	ctx := testenv.Context(t)
	c := openS3(t)
	st := memory.New()
	now := time.Now().UTC()
	if err := st.CreateSession(context.Background(), &berth.Session{ID: "ses_kid", RootID: "ses_root", ParentID: "ses_root", Agent: "demo",
		State: berth.StateStopped, ManagedWorkspace: true, Labels: map[string]string{}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	// The node the session ran on: two checkpoints, written to the store
	// with its state.
	old, ws := checkpoint.New(t.TempDir(), checkpoint.Options{}), t.TempDir()
	testenv.WriteFile(t, filepath.Join(ws, "a.txt"), "one", 0o644)
	first, err := old.CreateIn(ctx, "ses_root", "ses_kid", "turn_1", ws)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WriteFile(t, filepath.Join(ws, "a.txt"), "two", 0o644)
	second, err := old.CreateIn(ctx, "ses_root", "ses_kid", "turn_2", ws)
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan struct{}, 1)
	sy := objstore.NewSyncer(objstore.SyncerOptions{Uploader: objstore.NewUploader(c, t.TempDir()), Checkpoints: old,
		Resolve: func(context.Context, string, string) (objstore.Target, error) {
			return objstore.Target{Seq: 9, Workspace: ws}, nil
		},
		Synced: func(context.Context, string, int64, time.Time) error { synced <- struct{}{}; return nil },
	})
	sy.TurnEnded("ses_kid", "turn_2")
	select {
	case <-synced:
	case <-time.After(time.Minute):
		t.Fatal("never synced")
	}
	sy.Close(ctx)
	if err := st.SetStorageSynced(ctx, "ses_kid", 9, now); err != nil {
		t.Fatal(err)
	}

	var warnings []string
	here := checkpoint.New(t.TempDir(), checkpoint.Options{MaxTreeBytes: 1})
	r := objRestorer{c: c, store: st, ckpts: here, log: slog.New(slog.DiscardHandler),
		warn: func(id, reason string) { warnings = append(warnings, id+": "+reason) }}
	dir := t.TempDir()
	moved, home := filepath.Join(dir, "workspaces", "ses_kid"), filepath.Join(dir, "sessions", "ses_kid", "home")
	if err := r.Restore(ctx, "ses_kid", moved, home); err != nil {
		t.Fatal(err)
	}
	list, err := here.List("ses_kid")
	if err != nil || len(list) != 2 || list[0].ID != first.ID || list[1].ID != second.ID || len(warnings) != 0 {
		t.Fatalf("checkpoints here: %+v %v; warnings %v", list, err, warnings)
	}
	if _, err := here.Restore(ctx, "ses_kid", first.ID, moved); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(moved, "a.txt")); err != nil || string(b) != "one" {
		t.Fatalf("rewound to the first turn: %q %v", b, err)
	}
	// Counted in the root's tree: past its cap, a prune of it takes the
	// oldest.
	if ps, err := here.Prune("ses_root", nil); err != nil || len(ps) != 1 || ps[0].CheckpointID != first.ID {
		t.Fatalf("prune of the root's tree: %+v %v", ps, err)
	}

	// Another node: one checkpoint in the store is damaged (the last: the
	// one before it is whole, the base of those after it).
	key := objstore.CheckpointKey("ses_kid", second.ID)
	if err := c.Put(ctx, key, strings.NewReader("{damaged"), 8); err != nil {
		t.Fatal(err)
	}
	there := checkpoint.New(t.TempDir(), checkpoint.Options{})
	r.ckpts = there
	if err := r.Restore(ctx, "ses_kid", moved, home); err != nil {
		t.Fatalf("a damaged checkpoint stopped the move: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(moved, "a.txt")); err != nil || string(b) != "two" {
		t.Fatalf("the workspace after a move with a damaged checkpoint: %q %v", b, err)
	}
	list, err = there.List("ses_kid")
	if err != nil || len(list) != 1 || list[0].ID != first.ID {
		t.Fatalf("checkpoints there: %+v %v", list, err)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "ses_kid: the session's checkpoints did not all come") {
		t.Fatalf("warnings: %v", warnings)
	}
}
