package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// walSeq reads the checkpoint sequence number in the WAL's header: SQLite
// adds one each time a commit starts the WAL again from its first frame,
// which it syncs then.
func walSeq(t *testing.T, s *Store) uint32 {
	t.Helper()
	f, err := os.Open(s.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr := make([]byte, 16)
	if _, err := f.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.Uint32(hdr[12:])
}

// TestQuietCommitsDoNotRestartTheWAL: commits a little apart (a session's
// prompts and events) do not each start the WAL again — the background
// checkpoint does not copy it all after every commit, which would put an
// fsync on the next commit's path — and a pause folds it and starts it
// again off any commit's path.
func TestQuietCommitsDoNotRestartTheWAL(t *testing.T) {
	s := openAt(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	now := time.Now().UTC()
	commit := func(i int) {
		t.Helper()
		sess := &berth.Session{ID: fmt.Sprintf("ses_%026d", i), Agent: "demo", State: berth.StateStarting,
			Badge: berth.BadgeStarting, Workspace: "/w", CreatedAt: now, UpdatedAt: now, LastActivityAt: now}
		sess.RootID = sess.ID
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	commit(0)
	before := walSeq(t, s)
	// Each a pace apart: the old checkpointer copied the WAL after each.
	for i := 1; i <= 8; i++ {
		time.Sleep(checkpointPace + 20*time.Millisecond)
		commit(i)
	}
	if n := walSeq(t, s) - before; n > 1 {
		t.Fatalf("8 commits started the WAL again %d times", n)
	}
	// A pause folds the WAL, and the checkpointer starts it again itself
	// (its fsync is its own), before any commit.
	seq := walSeq(t, s)
	deadline := time.Now().Add(foldIdle + 10*time.Second)
	for walSeq(t, s) == seq {
		if time.Now().After(deadline) {
			t.Fatal("the WAL was never folded and started again after the writes paused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// So the commit after the pause (a prompt's) appends to it: no sync
	// of a new header on its path.
	seq = walSeq(t, s)
	commit(100)
	if got := walSeq(t, s); got != seq {
		t.Fatalf("the commit after a pause started the WAL again (%d → %d)", seq, got)
	}
}
