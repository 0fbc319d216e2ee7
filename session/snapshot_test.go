package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-sh/berth"
)

func TestSnapshotForksAWorkspace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if res := e.prompt(s.ID, "write notes/plan.txt the plan"); res.StopReason != berth.TurnEndTurn {
		t.Fatalf("write: %+v", res)
	}
	snap, err := e.m.CreateSnapshot(ctx, s.ID)
	if err != nil || snap.SessionID != s.ID || snap.SizeBytes <= 0 || snap.Files < 2 {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}
	if err := os.Remove(filepath.Join(s.Workspace, "notes", "plan.txt")); err != nil {
		t.Fatal(err)
	}
	fork := e.create(berth.CreateRequest{FromSnapshot: snap.ID})
	if fork.Workspace == s.Workspace || !fork.ManagedWorkspace {
		t.Fatalf("fork workspace: %s", fork.Workspace)
	}
	if res := e.prompt(fork.ID, "read notes/plan.txt"); res.Text != "the plan" {
		t.Fatalf("the fork reads %+v", res)
	}
	list, err := e.m.ListSnapshots(ctx, s.ID)
	if err != nil || len(list) != 1 || list[0].ID != snap.ID {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, bad := range []berth.CreateRequest{
		{Agent: "demo", FromSnapshot: "snap_01jzzzzzzzzzzzzzzzzzzzzzzz"},
		{Agent: "demo", FromSnapshot: snap.ID, Workspace: t.TempDir()},
	} {
		if _, err := e.m.CreateSession(ctx, bad); !berth.IsCode(err, berth.EInvalid) {
			t.Fatalf("create %+v = %v, want invalid_argument", bad, err)
		}
	}
	// Deleting the session deletes its snapshots.
	if err := e.m.DeleteSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.CreateSession(ctx, berth.CreateRequest{Agent: "demo", FromSnapshot: snap.ID}); !berth.IsCode(err, berth.EInvalid) {
		t.Fatalf("a deleted session's snapshot = %v", err)
	}
}
