package objstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/internal/testenv"
	"github.com/berth-sh/berth/snapshot"
)

// A deleted session's own objects (state.json, checkpoints, snapshots)
// leave the store; another session's stay, and so do the contents both
// name (packs). A deletion the store refuses is remembered: the daemon
// stopped before it is done, the next Syncer over the same directory
// does it at its start.
func TestDeletedSessionLeavesTheStore(t *testing.T) {
	c := openTest(t)
	ctx := testenv.Context(t)
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "alpha", "d/b.txt": "beta"})
	cs := checkpoint.New(t.TempDir(), checkpoint.Options{})
	ss := snapshot.New(t.TempDir())
	for _, id := range []string{"ses_gone", "ses_kept"} {
		if _, err := cs.Create(ctx, id, "turn_1", ws); err != nil {
			t.Fatal(err)
		}
		if _, err := ss.Create(ctx, id, ws); err != nil {
			t.Fatal(err)
		}
	}
	deleted := filepath.Join(t.TempDir(), "deleted")
	opts := func(c *Client) SyncerOptions {
		return SyncerOptions{Uploader: NewUploader(c, ""), Checkpoints: cs, Snapshots: ss, DeletedDir: deleted, Delay: time.Millisecond,
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
			Resolve: func(_ context.Context, id, _ string) (Target, error) { return Target{Seq: 1, Workspace: ws}, nil },
			Warn:    func(_, reason string) { t.Errorf("warning: %s", reason) },
		}
	}
	s := NewSyncer(opts(c))
	defer s.Close(context.Background())
	for _, id := range []string{"ses_gone", "ses_kept"} {
		s.TurnEnded(id, "turn_1")
	}
	for _, id := range []string{"ses_gone", "ses_kept"} {
		testenv.WaitFor(t, time.Minute, id+"'s snapshot in the store", func() bool { return countObjects(t, c, SessionKey(id)+"snapshots/") == 2 })
	}
	packs := countObjects(t, c, "packs/")

	// The store refuses: the deletion waits, remembered.
	down, proxy := openBehindProxy(t)
	proxy.SetDown(true)
	s2 := NewSyncer(opts(down))
	s2.Deleted("ses_gone")
	s2.Deleted("../escape")
	testenv.WaitFor(t, 30*time.Second, "a failed removal", func() bool { _, last := s2.Lag(); return last != "" })
	closing, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	s2.Close(closing)
	cancel()
	if _, err := os.Stat(filepath.Join(deleted, "ses_gone")); err != nil {
		t.Fatalf("the deletion not remembered: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(deleted), "escape")); !os.IsNotExist(err) {
		t.Fatalf("a bad id was remembered out of the directory: %v", err)
	}
	if n := countObjects(t, c, SessionKey("ses_gone")); n == 0 {
		t.Fatal("removed through a store that is down")
	}

	// The next Syncer does it at its start.
	s3rd := NewSyncer(opts(c))
	defer s3rd.Close(context.Background())
	testenv.WaitFor(t, time.Minute, "the deleted session's objects gone", func() bool { return countObjects(t, c, SessionKey("ses_gone")) == 0 })
	testenv.WaitFor(t, 10*time.Second, "the deletion forgotten", func() bool {
		_, err := os.Stat(filepath.Join(deleted, "ses_gone"))
		return os.IsNotExist(err)
	})
	if n := countObjects(t, c, SessionKey("ses_kept")); n < 4 {
		t.Fatalf("the other session has %d objects left, want its state, checkpoint and snapshot", n)
	}
	if n := countObjects(t, c, "packs/"); n != packs {
		t.Fatalf("%d packs after the deletion, %d before: the contents others name stay", n, packs)
	}
	// A turn of a deleted session that ends late writes nothing back.
	s3rd.Deleted("ses_kept")
	s3rd.TurnEnded("ses_kept", "turn_2")
	testenv.WaitFor(t, time.Minute, "the second deleted session's objects gone", func() bool { return countObjects(t, c, SessionKey("ses_kept")) == 0 })
}
