package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
)

// warmKept waits until the store keeps n warm captures.
func warmKept(t *testing.T, st *checkpoint.Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st.WarmStats().Kept == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d warm captures kept, want %d", st.WarmStats().Kept, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkpointedSession is a demo session with checkpoints on that ran
// one turn of prompt.
func checkpointedSession(t *testing.T, prompt string) (*env, *checkpoint.Store, *berth.Session) {
	t.Helper()
	e := newEnv(t, withCheckpoints(t.TempDir(), t.TempDir()))
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, prompt)
	return e, e.m.opts.Checkpoints, s
}

// checkpointOf returns the checkpoint taken before turnID.
func checkpointOf(t *testing.T, e *env, id, turnID string) berth.Checkpoint {
	t.Helper()
	list, err := e.m.ListCheckpoints(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if c.TurnID == turnID {
			return *c
		}
	}
	t.Fatalf("no checkpoint of turn %s in %+v", turnID, list)
	return berth.Checkpoint{}
}

// TestCheckpointTakenAheadIsTheTurnsStart: the checkpoint of a turn is
// taken at the end of the turn before (off the prompt's path) and, the
// workspace unchanged since, is the turn's: the agent writes in its first
// moment, and a rewind to the turn's checkpoint gives the workspace as the
// turn found it.
func TestCheckpointTakenAheadIsTheTurnsStart(t *testing.T) {
	e, st, s := checkpointedSession(t, "write a.txt one\nwrite sub/b.txt bee")
	warmKept(t, st, 1)
	taken := st.WarmStats().Taken
	r := e.prompt(s.ID, "write a.txt two\nwrite sub/c.txt sea")
	if now := st.WarmStats().Taken; now != taken+1 {
		t.Fatalf("the turn did not take the checkpoint taken ahead (%d taken, was %d)", now, taken)
	}
	c := checkpointOf(t, e, s.ID, r.TurnID)
	if c.Files != 2 {
		t.Fatalf("checkpoint of %d files, want 2", c.Files)
	}
	warmKept(t, st, 1)
	if _, err := e.m.Rewind(context.Background(), s.ID, berth.RewindRequest{CheckpointID: c.ID}); err != nil {
		t.Fatal(err)
	}
	if a, b, sea := readFile(t, s.Workspace, "a.txt"), readFile(t, s.Workspace, "sub/b.txt"), readFile(t, s.Workspace, "sub/c.txt"); a != "one" || b != "bee" || sea != "" {
		t.Fatalf("after rewind: a.txt %q, sub/b.txt %q, sub/c.txt %q", a, b, sea)
	}
	// The rewind takes the next checkpoint ahead again; a stop drops it.
	warmKept(t, st, 1)
	if _, err := e.m.StopSession(context.Background(), s.ID); err != nil {
		t.Fatal(err)
	}
	warmKept(t, st, 0)
}

// TestUserEditBetweenTurnsIsInTheNextCheckpoint: a file the user changes
// while the session is idle, after the next checkpoint was taken ahead,
// is in the next turn's checkpoint: the one taken ahead is not used when
// the prompt comes at once, and is taken again (with the edit) when the
// prompt comes after a pause.
func TestUserEditBetweenTurnsIsInTheNextCheckpoint(t *testing.T) {
	e, st, s := checkpointedSession(t, "write a.txt one")
	// rewound rewinds to turnID's checkpoint; it returns the captures made
	// before the rewind.
	rewound := func(turnID, want string) int64 {
		t.Helper()
		c := checkpointOf(t, e, s.ID, turnID)
		warmKept(t, st, 1)
		made := st.WarmStats().Made
		if _, err := e.m.Rewind(context.Background(), s.ID, berth.RewindRequest{CheckpointID: c.ID}); err != nil {
			t.Fatal(err)
		}
		if a := readFile(t, s.Workspace, "a.txt"); a != want {
			t.Fatalf("after rewind a.txt is %q, want %q: the user's edit is not in the checkpoint", a, want)
		}
		return made
	}

	warmKept(t, st, 1)
	// Same size, same second: only the watch tells.
	if err := os.WriteFile(filepath.Join(s.Workspace, "a.txt"), []byte("One"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.prompt(s.ID, "write a.txt two")
	made := rewound(r.TurnID, "One")

	// Once the rewind's own capture is made (the capture it closed is not
	// counted any more), the user edits and pauses: the edit comes after
	// that capture's walk, which it makes stale.
	deadline := time.Now().Add(20 * time.Second)
	for ws := st.WarmStats(); ws.Made == made || ws.Kept != 1; ws = st.WarmStats() {
		if time.Now().After(deadline) {
			t.Fatalf("the checkpoint was not taken ahead after the rewind: %+v", ws)
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := st.WarmStats()
	if err := os.WriteFile(filepath.Join(s.Workspace, "a.txt"), []byte("ONE"), 0o644); err != nil {
		t.Fatal(err)
	}
	for st.WarmStats().Made == before.Made {
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint was not taken ahead again after the user's edit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	warmKept(t, st, 1)
	r = e.prompt(s.ID, "write a.txt three")
	if st.WarmStats().Taken != before.Taken+1 {
		t.Fatal("the checkpoint taken again after the edit was not used")
	}
	rewound(r.TurnID, "ONE")
}
