package session

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
)

// fakeRestorer is the object store: it makes the directories asked
// afresh and copies into them the workspace and HOME it was given (as of
// a turn's end), or fails.
type fakeRestorer struct {
	mu        sync.Mutex
	ws, home  string
	err       error
	calls     []string
	restoreTo []string
}

func (r *fakeRestorer) Restore(ctx context.Context, id, ws, home string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, id)
	r.restoreTo = []string{ws, home}
	if r.err != nil {
		return r.err
	}
	for _, p := range [][2]string{{r.ws, ws}, {r.home, home}} {
		if err := errors.Join(os.RemoveAll(p[1]), os.MkdirAll(p[1], 0o700)); err != nil {
			return err
		}
		if out, err := exec.Command("cp", "-a", p[0]+"/.", p[1]).CombinedOutput(); err != nil {
			return berth.Errorf(berth.EInternal, "cp: %v %s", err, out)
		}
	}
	return nil
}

// copyDir copies dir into a new temporary directory and returns it.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return to
}

// lastStartedBy is the resumed_by of the session's last session_started.
func lastStartedBy(t *testing.T, e *env, id string) string {
	t.Helper()
	by := ""
	for _, ev := range e.events(id) {
		if ev.Type == berth.EventSessionStarted {
			var d struct {
				ResumedBy string `json:"resumed_by"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			by = d.ResumedBy
		}
	}
	return by
}

// movedAway makes a stopped managed session look like another node's:
// its stored workspace under that node's root, nothing of it on this
// node's disk.
func movedAway(t *testing.T, e *env, id string) (ws string) {
	t.Helper()
	ctx := context.Background()
	s, err := e.store.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ws = s.Workspace
	s.Workspace = filepath.Join(t.TempDir(), "node-a", "workspaces", id)
	if err := e.store.UpdateSession(ctx, s, berth.StateStopped); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.RemoveAll(e.m.place.homeDir(id)), os.RemoveAll(ws)); err != nil {
		t.Fatal(err)
	}
	return ws
}

// A managed session of another node resumed here (what failover does) is
// re-homed under this node's workspace root, in the store too, its
// workspace and HOME restored before the agent starts, and the demo agent
// reloads its own conversation from the restored HOME (resumed_by load:
// without the HOME it would replay the transcript).
func TestResumeMovesASessionFromAnotherNode(t *testing.T) {
	r := &fakeRestorer{}
	e := newEnv(t, func(o *Options) { o.Restorer = r })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "write a.txt one")
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	r.ws, r.home = copyDir(t, s.Workspace), copyDir(t, e.m.place.homeDir(s.ID))
	// Resumed where it is, a session does not move.
	if _, err := e.m.ResumeSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.StopSession(ctx, s.ID); err != nil || len(r.calls) != 0 {
		t.Fatalf("a resume in place restored %v (stop: %v)", r.calls, err)
	}

	ws := movedAway(t, e, s.ID)
	got, err := e.m.ResumeSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Workspace != ws || got.State != berth.StateActive {
		t.Fatalf("moved: workspace %s state %s, want %s active", got.Workspace, got.State, ws)
	}
	if stored, _ := e.store.GetSession(ctx, s.ID); stored.Workspace != ws {
		t.Fatalf("stored workspace %s", stored.Workspace)
	}
	if len(r.calls) != 1 || r.restoreTo[0] != ws || r.restoreTo[1] != e.m.place.homeDir(s.ID) {
		t.Fatalf("restores %v into %v", r.calls, r.restoreTo)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "one" {
		t.Fatalf("a.txt = %q %v", b, err)
	}
	if by := lastStartedBy(t, e, s.ID); by != "load" {
		t.Fatalf("resumed_by %q, want load", by)
	}
	if res := e.prompt(s.ID, "echo here"); res.Text != "here" {
		t.Fatalf("prompt after the move: %+v", res)
	}
}

// A restore that fails leaves the session stopped where it was (its
// stored workspace unchanged, for another try), nothing of it left on
// this node; once the store answers, the same resume moves it.
func TestResumeThatCannotRestoreLeavesTheSession(t *testing.T) {
	r := &fakeRestorer{err: berth.Errorf(berth.EUnavailable, "object store: connection refused")}
	e := newEnv(t, func(o *Options) { o.Restorer = r })
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	ws := movedAway(t, e, s.ID)
	before, _ := e.store.GetSession(ctx, s.ID)
	if _, err := e.m.ResumeSession(ctx, s.ID); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("resume with the store down: %v", err)
	}
	after, _ := e.store.GetSession(ctx, s.ID)
	if after.State != berth.StateStopped || after.Workspace != before.Workspace {
		t.Fatalf("after a failed restore: %s %s", after.State, after.Workspace)
	}
	for _, d := range []string{ws, e.m.place.sessionDir(s.ID)} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s left: %v", d, err)
		}
	}

	r.err = nil
	r.ws, r.home = t.TempDir(), t.TempDir()
	if got, err := e.m.ResumeSession(ctx, s.ID); err != nil || got.Workspace != ws {
		t.Fatalf("resume once the store is back: %v", err)
	}
}
