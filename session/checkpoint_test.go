package session

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
)

// withCheckpoints turns checkpoints on, and gives the demo agents a state
// directory they share (a fork through session/fork finds its parent's
// conversation there).
func withCheckpoints(home, state string) func(*Options) {
	return func(o *Options) {
		o.Checkpoints = checkpoint.New(filepath.Join(home, "checkpoints"), checkpoint.Options{})
		cat := catalog()
		for _, name := range []string{"demo", "demo-nofork"} {
			spec := cat["demo"]
			spec.Name = name
			spec.Args = []string{"--state-dir", state}
			if name == "demo-nofork" {
				spec.Args = append(spec.Args, "--no-fork")
			}
			cat[name] = spec
		}
		o.Catalog = cat
	}
}

// readFile returns a workspace file's content, "" when it is missing.
func readFile(t *testing.T, ws, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, rel))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startedBy returns resumed_by of the session's first session_started.
func startedBy(t *testing.T, e *env, id string) string {
	t.Helper()
	for _, ev := range e.events(id) {
		if ev.Type == berth.EventSessionStarted {
			var d struct {
				ResumedBy string `json:"resumed_by"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			return d.ResumedBy
		}
	}
	t.Fatal("no session_started")
	return ""
}

// TestCheckpointsRewind: every turn is preceded by a checkpoint (listed,
// logged); rewind restores the workspace exactly, is refused while a turn
// runs, is logged, and the agent's next prompt says so.
func TestCheckpointsRewind(t *testing.T) {
	home := t.TempDir()
	e := newEnv(t, withCheckpoints(home, t.TempDir()))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "write a.txt one")
	r2 := e.prompt(s.ID, "write a.txt two\nwrite sub/b.txt bee")
	if got := readFile(t, s.Workspace, "a.txt"); got != "two" {
		t.Fatalf("a.txt %q", got)
	}
	list, err := e.m.ListCheckpoints(ctx, s.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("list %+v %v", list, err)
	}
	if list[1].TurnID != r2.TurnID || list[1].Files != 1 || list[0].Files != 0 {
		t.Fatalf("checkpoints %+v %+v (turn 2 %s)", list[0], list[1], r2.TurnID)
	}
	var created []string
	for _, ev := range e.events(s.ID) {
		if ev.Type == berth.EventCheckpointCreated {
			var d struct{ ID, TurnID string }
			_ = json.Unmarshal(ev.Data, &d)
			if ev.TurnID == "" || d.ID == "" {
				t.Fatalf("checkpoint_created %s", ev.Data)
			}
			created = append(created, d.ID)
		}
	}
	if len(created) != 2 || created[1] != list[1].ID {
		t.Fatalf("checkpoint_created ids %v", created)
	}

	// Busy: 409, nothing restored.
	// The turn is in flight from Prompt's answer until its end.
	pr, err := e.m.Prompt(ctx, s.ID, berth.PromptRequest{Text: "sleep 2000"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rewind(ctx, s.ID, berth.RewindRequest{CheckpointID: list[1].ID}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("rewind while busy: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := e.m.WaitTurn(wctx, s.ID, pr.TurnID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rewind(ctx, s.ID, berth.RewindRequest{CheckpointID: "ckpt_01jzzzzzzzzzzzzzzzzzzzzzzz"}); !berth.IsCode(err, berth.ENotFound) {
		t.Fatalf("unknown checkpoint: %v", err)
	}

	if _, err := e.m.Rewind(ctx, s.ID, berth.RewindRequest{CheckpointID: list[1].ID}); err != nil {
		t.Fatal(err)
	}
	if a, b := readFile(t, s.Workspace, "a.txt"), readFile(t, s.Workspace, "sub/b.txt"); a != "one" || b != "" {
		t.Fatalf("after rewind: a.txt %q, sub/b.txt %q", a, b)
	}
	if _, err := os.Stat(filepath.Join(s.Workspace, "sub")); !os.IsNotExist(err) {
		t.Fatalf("sub/ was created after the checkpoint and is still there: %v", err)
	}
	evs := e.events(s.ID)
	rewound := false
	for _, ev := range evs {
		if ev.Type == berth.EventWorkspaceRewound && strings.Contains(string(ev.Data), list[1].ID) {
			rewound = true
		}
	}
	if !rewound {
		t.Fatal("no workspace_rewound event")
	}
	// The demo agent echoes plain lines: the note reached it.
	if res := e.prompt(s.ID, "echo after"); !strings.Contains(res.Text, "rewound the workspace") || !strings.Contains(res.Text, "after") {
		t.Fatalf("the agent was not told: %q", res.Text)
	}
	if res := e.prompt(s.ID, "echo again"); strings.Contains(res.Text, "rewound") {
		t.Fatalf("told twice: %q", res.Text)
	}

	// Stopped: 409.
	if _, err := e.m.StopSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rewind(ctx, s.ID, berth.RewindRequest{CheckpointID: list[0].ID}); !berth.IsCode(err, berth.EConflict) {
		t.Fatalf("rewind of a stopped session: %v", err)
	}
}

// historyPrompts reads the prompts of a demo agent's stored conversation.
func historyPrompts(t *testing.T, state, acpID string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(state, acpID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct{ Type, Text string }
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Type == "user" {
			out = append(out, r.Text)
		}
	}
	return out
}

// TestForkFromCheckpoint: a fork's workspace is the checkpoint's copy and
// its conversation the parent's turns before it, through session/fork when
// the agent offers it and by replay otherwise; forked_from is recorded;
// deleting the parent frees its checkpoints and leaves the fork whole.
func TestForkFromCheckpoint(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	e := newEnv(t, withCheckpoints(home, state))
	ctx := context.Background()
	for _, tc := range []struct{ agent, how string }{{"demo", "fork"}, {"demo-nofork", "transcript"}} {
		t.Run(tc.agent, func(t *testing.T) {
			p := e.create(berth.CreateRequest{Agent: tc.agent})
			e.prompt(p.ID, "write a.txt one")
			e.prompt(p.ID, "write a.txt two")
			e.prompt(p.ID, "write c.txt three")
			list, err := e.m.ListCheckpoints(ctx, p.ID)
			if err != nil || len(list) != 3 {
				t.Fatalf("list %v %v", list, err)
			}
			f, err := e.m.Fork(ctx, p.ID, berth.ForkRequest{CheckpointID: list[1].ID, Name: "retry"})
			if err != nil {
				t.Fatal(err)
			}
			if f.State != berth.StateActive || f.ForkedFrom == nil || *f.ForkedFrom != (berth.ForkRef{SessionID: p.ID, CheckpointID: list[1].ID}) || f.Name != "retry" {
				t.Fatalf("fork %+v", f)
			}
			if f.Workspace == p.Workspace || readFile(t, f.Workspace, "a.txt") != "one" || readFile(t, f.Workspace, "c.txt") != "" {
				t.Fatalf("fork workspace: a=%q c=%q", readFile(t, f.Workspace, "a.txt"), readFile(t, f.Workspace, "c.txt"))
			}
			if got := startedBy(t, e, f.ID); got != tc.how {
				t.Fatalf("resumed_by %q, want %q", got, tc.how)
			}
			res := e.prompt(f.ID, "echo forked")
			switch tc.how {
			case "fork":
				// The agent's own copy of the conversation: the first turn only.
				if got := historyPrompts(t, state, f.ACP.SessionID); len(got) != 2 || got[0] != "write a.txt one" || got[1] != "echo forked" {
					t.Fatalf("forked conversation %q", got)
				}
			case "transcript":
				if !strings.Contains(res.Text, "User: write a.txt one") || strings.Contains(res.Text, "a.txt two") {
					t.Fatalf("replayed conversation %q", res.Text)
				}
			}
			if got, _ := e.m.GetSession(ctx, f.ID); got.ForkedFrom == nil {
				t.Fatal("forked_from not stored")
			}
			// The parent's delete frees its checkpoints; the fork is whole.
			if err := e.m.DeleteSession(ctx, p.ID); err != nil {
				t.Fatal(err)
			}
			if l, err := e.m.opts.Checkpoints.List(p.ID); err != nil || len(l) != 0 {
				t.Fatalf("parent checkpoints after delete: %v %v", l, err)
			}
			if readFile(t, f.Workspace, "a.txt") != "one" {
				t.Fatal("fork workspace changed")
			}
			if _, err := e.m.Fork(ctx, p.ID, berth.ForkRequest{CheckpointID: list[1].ID}); !berth.IsCode(err, berth.ENotFound) {
				t.Fatalf("fork of a deleted session: %v", err)
			}
		})
	}
}

// TestCheckpointsOff: with [checkpoints] enabled = false no checkpoint is
// taken and rewind/fork answer unavailable.
func TestCheckpointsOff(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	s := e.create(berth.CreateRequest{})
	e.prompt(s.ID, "write a.txt one")
	for _, ev := range e.events(s.ID) {
		if ev.Type == berth.EventCheckpointCreated {
			t.Fatal("a checkpoint was taken")
		}
	}
	if l, err := e.m.ListCheckpoints(ctx, s.ID); err != nil || len(l) != 0 {
		t.Fatalf("list %v %v", l, err)
	}
	if _, err := e.m.Rewind(ctx, s.ID, berth.RewindRequest{CheckpointID: "ckpt_01jzzzzzzzzzzzzzzzzzzzzzzz"}); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("rewind: %v", err)
	}
	if _, err := e.m.Fork(ctx, s.ID, berth.ForkRequest{CheckpointID: "ckpt_01jzzzzzzzzzzzzzzzzzzzzzzz"}); !berth.IsCode(err, berth.EUnavailable) {
		t.Fatalf("fork: %v", err)
	}
}

// TestNotesSurviveARestart: the rewind's note and a replayed fork's earlier
// turns are on disk until the next prompt: a daemon restarted in between
// still sends them.
func TestNotesSurviveARestart(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	e := newEnv(t, withCheckpoints(home, state))
	ctx := context.Background()
	s := e.create(berth.CreateRequest{Agent: "demo-nofork"})
	e.prompt(s.ID, "write a.txt one")
	e.prompt(s.ID, "write a.txt two")
	list, err := e.m.ListCheckpoints(ctx, s.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("list %v %v", list, err)
	}
	if _, err := e.m.Rewind(ctx, s.ID, berth.RewindRequest{CheckpointID: list[1].ID}); err != nil {
		t.Fatal(err)
	}
	f, err := e.m.Fork(ctx, s.ID, berth.ForkRequest{CheckpointID: list[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	e.close()
	e.open(withCheckpoints(home, state))
	if res := e.prompt(s.ID, "echo after the restart"); !strings.Contains(res.Text, "rewound the workspace") {
		t.Fatalf("the rewind's note was lost: %q", res.Text)
	}
	if res := e.prompt(f.ID, "echo the fork"); !strings.Contains(res.Text, "User: write a.txt one") || strings.Contains(res.Text, "a.txt two") {
		t.Fatalf("the fork's earlier turns were lost: %q", res.Text)
	}
}

// TestRewindRefusedWhileAChildWorksInTheWorkspace: a child shares its
// parent's workspace, so the parent's rewind waits for the child's turn.
func TestRewindRefusedWhileAChildWorksInTheWorkspace(t *testing.T) {
	home := t.TempDir()
	e := newEnv(t, withCheckpoints(home, t.TempDir()), func(o *Options) { o.Limits.MaxChildren = 2; o.Limits.MaxDepth = 1 })
	ctx := context.Background()
	p := e.create(berth.CreateRequest{})
	e.prompt(p.ID, "write a.txt one")
	list, err := e.m.ListCheckpoints(ctx, p.ID)
	if err != nil || len(list) != 1 {
		t.Fatalf("list %v %v", list, err)
	}
	kid := e.spawn(p.ID, berth.CreateRequest{})
	if kid.Workspace != p.Workspace {
		t.Fatalf("the child's workspace %s is not its parent's %s", kid.Workspace, p.Workspace)
	}
	pr, err := e.m.Prompt(ctx, kid.ID, berth.PromptRequest{Text: "sleep 2000"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Rewind(ctx, p.ID, berth.RewindRequest{CheckpointID: list[0].ID})
	if !berth.IsCode(err, berth.EConflict) || !strings.Contains(err.Error(), kid.ID) {
		t.Fatalf("rewind while the child works: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := e.m.WaitTurn(wctx, kid.ID, pr.TurnID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Rewind(ctx, p.ID, berth.RewindRequest{CheckpointID: list[0].ID}); err != nil {
		t.Fatalf("rewind once the child is idle: %v", err)
	}
	// The prompt of the session itself still goes through afterwards.
	e.prompt(p.ID, "echo ok")
}

// TestCheckpointFailureIsAWarning: a checkpoint that cannot be taken (its
// store is not a directory) is a runtime_warning in the turn, which goes on
// and ends normally.
func TestCheckpointFailureIsAWarning(t *testing.T) {
	home := t.TempDir()
	blocked := filepath.Join(home, "not-a-dir")
	if err := os.WriteFile(blocked, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options) { o.Checkpoints = checkpoint.New(blocked, checkpoint.Options{}) })
	s := e.create(berth.CreateRequest{})
	res := e.prompt(s.ID, "write a.txt one")
	if res.StopReason != berth.TurnEndTurn || readFile(t, s.Workspace, "a.txt") != "one" {
		t.Fatalf("the turn: %+v", res)
	}
	warned := false
	for _, ev := range e.events(s.ID) {
		if ev.Type == berth.EventCheckpointCreated {
			t.Fatal("a checkpoint was logged")
		}
		if ev.Type == berth.EventRuntimeWarning && ev.TurnID == res.TurnID && strings.Contains(string(ev.Data), "no checkpoint") {
			warned = true
		}
	}
	if !warned {
		t.Fatal("no runtime_warning in the turn")
	}
}

// TestForkFindsTheParentsConversationInItsHome: with the demo agent's
// default state directory (under its private HOME), session/fork finds the
// parent's conversation because the fork's HOME is a copy of the parent's;
// a fork with another agent gets no copy and replays.
func TestForkFindsTheParentsConversationInItsHome(t *testing.T) {
	home := t.TempDir()
	e := newEnv(t, func(o *Options) {
		o.Checkpoints = checkpoint.New(filepath.Join(home, "checkpoints"), checkpoint.Options{})
	})
	ctx := context.Background()
	p := e.create(berth.CreateRequest{})
	e.prompt(p.ID, "write a.txt one")
	e.prompt(p.ID, "write a.txt two")
	list, err := e.m.ListCheckpoints(ctx, p.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("list %v %v", list, err)
	}
	f, err := e.m.Fork(ctx, p.ID, berth.ForkRequest{CheckpointID: list[1].ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := startedBy(t, e, f.ID); got != "fork" {
		t.Fatalf("resumed_by %q, want fork", got)
	}
	other, err := e.m.Fork(ctx, p.ID, berth.ForkRequest{CheckpointID: list[1].ID, Agent: "demo-noload"})
	if err != nil {
		t.Fatal(err)
	}
	if got := startedBy(t, e, other.ID); got != "transcript" {
		t.Fatalf("another agent's fork: resumed_by %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.m.place.homeDir(other.ID), ".berth-demo", p.ACP.SessionID+".jsonl")); !os.IsNotExist(err) {
		t.Fatalf("another agent's fork got the parent agent's home: %v", err)
	}
}

// prunedIn returns the checkpoint_pruned events of a session's log, by
// checkpoint id.
func prunedIn(t *testing.T, e *env, id string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, d := range childEvents(t, e.events(id), berth.EventCheckpointPruned) {
		out[d["checkpoint_id"].(string)] = d
	}
	return out
}

// TestCheckpointsArePrunedPerTree: a parent and its child writing into
// their workspace turn after turn keep their tree's checkpoints under
// [checkpoints] max_tree_bytes: the oldest go, each logged
// checkpoint_pruned in its own session's log — in the log of the session
// whose turn pruned it when its own has ended — and answer not_found
// "pruned" to rewind and fork; another tree's stay.
func TestCheckpointsArePrunedPerTree(t *testing.T) {
	home := t.TempDir()
	e := newEnv(t, withCheckpoints(home, t.TempDir()), func(o *Options) {
		o.Checkpoints = checkpoint.New(filepath.Join(home, "checkpoints"), checkpoint.Options{MaxTreeBytes: 72 << 10})
	})
	ctx := context.Background()
	other := e.create(berth.CreateRequest{})
	e.prompt(other.ID, "run head -c 30000 /dev/urandom > o")
	e.prompt(other.ID, "echo the other tree")
	root := e.create(berth.CreateRequest{})
	kid := e.spawn(root.ID, berth.CreateRequest{})
	// Each turn's checkpoint holds what the turn before wrote: 20 KiB
	// more for the tree and 8 KiB of its own files; the first checkpoint
	// and two more fit.
	var rootList, kidList []*berth.Checkpoint
	turn := func(s *berth.Session, list *[]*berth.Checkpoint) {
		e.prompt(s.ID, "run head -c 20480 /dev/urandom > a")
		// The newest checkpoint of the tree is never pruned.
		l, err := e.m.ListCheckpoints(ctx, s.ID)
		if err != nil || len(l) == 0 {
			t.Fatalf("list %v %v", l, err)
		}
		*list = append(*list, l[len(l)-1])
	}
	turn(root, &rootList)
	turn(kid, &kidList)
	turn(root, &rootList)
	turn(kid, &kidList)
	if _, err := e.m.StopSession(ctx, kid.ID); err != nil {
		t.Fatal(err)
	}
	turn(root, &rootList)
	turn(root, &rootList)

	// Pruned: the root's first two (each in its log), the child's first
	// (in its log, while it ran) and its second (in the root's, whose turn
	// pruned it after the child stopped). The commits and prunes end after
	// the turns: polled.
	var inRoot, inKid map[string]map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		inRoot, inKid = prunedIn(t, e, root.ID), prunedIn(t, e, kid.ID)
		if len(inRoot) >= 3 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []struct {
		in      map[string]map[string]any
		session string
		c       *berth.Checkpoint
	}{{inRoot, root.ID, rootList[0]}, {inRoot, root.ID, rootList[1]}, {inKid, kid.ID, kidList[0]}, {inRoot, kid.ID, kidList[1]}} {
		d := want.in[want.c.ID]
		if d == nil || d["session_id"] != want.session || d["turn_id"] != want.c.TurnID {
			t.Fatalf("checkpoint_pruned of %s: %v (root %v, child %v)", want.c.ID, d, inRoot, inKid)
		}
	}
	if len(inRoot) != 3 || len(inKid) != 1 {
		t.Fatalf("pruned: root's log %v, child's %v", inRoot, inKid)
	}
	if evs := e.events(kid.ID); evs[len(evs)-1].Type != berth.EventSessionStopped {
		t.Fatalf("the child's log ends with %s", evs[len(evs)-1].Type)
	}
	if list, _ := e.m.ListCheckpoints(ctx, root.ID); len(list) != 2 || list[0].ID != rootList[2].ID {
		t.Fatalf("the root lists %+v", list)
	}
	_, err := e.m.Rewind(ctx, root.ID, berth.RewindRequest{CheckpointID: rootList[0].ID})
	if !berth.IsCode(err, berth.ENotFound) || !strings.Contains(berth.ErrorMessage(err), "pruned") {
		t.Fatalf("rewind to a pruned checkpoint: %v", err)
	}
	_, err = e.m.Fork(ctx, kid.ID, berth.ForkRequest{CheckpointID: kidList[1].ID})
	if !berth.IsCode(err, berth.ENotFound) || !strings.Contains(berth.ErrorMessage(err), "pruned") {
		t.Fatalf("fork of a pruned checkpoint: %v", err)
	}
	if list, _ := e.m.ListCheckpoints(ctx, other.ID); len(list) != 2 || len(prunedIn(t, e, other.ID)) != 0 {
		t.Fatalf("the other tree lists %+v", list)
	}
}
