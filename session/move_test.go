package session

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/berth-sh/berth"
)

// fakeRestorer is the object store: it makes the directories asked
// afresh and copies into them the workspace and HOME it was given (as of
// a turn's end), or fails.
type fakeRestorer struct {
	mu       sync.Mutex
	ws, home string
	// homes are the HOMEs of other sessions, by id (the others get home).
	homes     map[string]string
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
	from := r.home
	if h, ok := r.homes[id]; ok {
		from = h
	}
	for _, p := range [][2]string{{r.ws, ws}, {from, home}} {
		if p[1] == "" {
			// The HOME alone.
			continue
		}
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

// A child of a root session moved here (what failover does, the root
// first) moves with it: its workspace is the same place in the root's
// workspace, now restored under this node's root, and only its own HOME
// comes from the store (a workspace restored for it would wipe the
// root's); the demo agent reloads its conversation from that HOME. Its
// place made a link to elsewhere (what an agent could leave in the store)
// is refused, the child left stopped.
func TestResumeMovesAChildWithItsRoot(t *testing.T) {
	r := &fakeRestorer{homes: map[string]string{}}
	e := newEnv(t, func(o *Options) { o.Restorer = r })
	ctx := context.Background()
	root := e.create(berth.CreateRequest{})
	if err := os.Mkdir(filepath.Join(root.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	kid := e.spawn(root.ID, berth.CreateRequest{Workspace: filepath.Join(root.Workspace, "sub")})
	e.prompt(kid.ID, "write k.txt kid")
	if _, err := e.m.StopSession(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	r.ws, r.home = copyDir(t, root.Workspace), copyDir(t, e.m.place.homeDir(root.ID))
	r.homes[kid.ID] = copyDir(t, e.m.place.homeDir(kid.ID))
	ws := movedAway(t, e, root.ID)
	// The child's stored workspace is its place in the root's on node a.
	old, _ := e.store.GetSession(ctx, root.ID)
	k, _ := e.store.GetSession(ctx, kid.ID)
	k.Workspace = filepath.Join(old.Workspace, "sub")
	if err := e.store.UpdateSession(ctx, k, berth.StateStopped); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.m.place.homeDir(kid.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ResumeSession(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	// The agents' files came through the store: a link there is refused.
	sub := filepath.Join(ws, "sub")
	if err := errors.Join(os.Rename(sub, sub+".real"), os.Symlink(t.TempDir(), sub)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.ResumeSession(ctx, kid.ID); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("a child whose place is a link resumed: %v", err)
	}
	if got, _ := e.store.GetSession(ctx, kid.ID); got.State != berth.StateStopped || got.Workspace != k.Workspace {
		t.Fatalf("after the refusal: %s %s", got.State, got.Workspace)
	}
	if err := errors.Join(os.Remove(sub), os.Rename(sub+".real", sub)); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.ResumeSession(ctx, kid.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Workspace != sub || got.State != berth.StateActive || got.ParentID != root.ID {
		t.Fatalf("moved child: workspace %s state %s parent %s, want %s active %s", got.Workspace, got.State, got.ParentID, sub, root.ID)
	}
	if !slices.Equal(r.restoreTo, []string{"", e.m.place.homeDir(kid.ID)}) {
		t.Fatalf("the child restored into %q", r.restoreTo)
	}
	if b, err := os.ReadFile(filepath.Join(sub, "k.txt")); err != nil || string(b) != "kid" {
		t.Fatalf("k.txt = %q %v", b, err)
	}
	if by := lastStartedBy(t, e, kid.ID); by != "load" {
		t.Fatalf("resumed_by %q, want load", by)
	}
	if res := e.prompt(kid.ID, "echo here"); res.Text != "here" {
		t.Fatalf("prompt after the move: %+v", res)
	}
}
