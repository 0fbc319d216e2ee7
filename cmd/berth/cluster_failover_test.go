package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/testenv"
)

// storageNode runs `berth serve` as node id of the cluster on db, in a
// home of its own (so with its own workspace root, as on a machine of its
// own), its sessions' state in the object store at storageURL: failover
// is "resume", the default with a storage URL.
func storageNode(t *testing.T, db, id, storageURL string, s3 testenv.S3) *server {
	t.Helper()
	addr := freeAddr(t)
	env := append([]string{"BERTH_CLUSTER_TOKEN=test-node-token", "BERTH_CLUSTER_LEASE_TTL=" + clusterTTL.String(),
		"BERTH_STORAGE_URL=" + storageURL}, s3.Environ()...)
	s := startServerAddr(t, t.TempDir(), addr, env, "--store", db, "--node-id", id, "--advertise", "http://"+addr)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of %s:\n%s", id, s.log)
		}
	})
	return s
}

// syncedTo waits until the object store has session id as of event seq.
func syncedTo(t *testing.T, s *server, id string, seq int64) {
	t.Helper()
	// After the store's server was down, the syncer's backoff (doubling
	// from 1 s, up to a minute) may put its next try well past 30 s on a
	// loaded machine.
	waitFor(t, 90*time.Second, "the object store has the session's last turn", func() bool {
		got := s.session(t, id)
		return got.Storage != nil && got.Storage.SyncedSeq >= seq
	})
}

// lastOf returns the last event of type typ in evs (nil for none).
func lastOf(evs []berth.Event, typ string) *berth.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ {
			return &evs[i]
		}
	}
	return nil
}

// typesOf lists the types of evs, for a failure's message.
func typesOf(evs []berth.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// fileIs fails unless file name of dir holds want ("" for absent).
func fileIs(t *testing.T, dir, name, want string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	switch {
	case want == "" && !os.IsNotExist(err):
		t.Fatalf("%s in the moved workspace: %q %v", name, b, err)
	case want != "" && (err != nil || string(b) != want):
		t.Fatalf("%s in the moved workspace = %q %v, want %q", name, b, err, want)
	}
}

// The scenario with real components only: three nodes on one
// PostgreSQL, each with its own home and workspace root, sharing a
// SeaweedFS S3 store. On node A: a session busy in a turn (it wrote a
// file, then sleeps) with a prompt queued behind it, an idle one, and one
// on a host path. The store stops and restarts meanwhile: a turn still
// runs, and synced_seq catches up. A is SIGKILLed: the two managed
// sessions come back active on B and C (the least loaded: one each),
// re-homed under that node's workspace root with the files of their last
// completed turn (not the interrupted turn's), the demo agent reloading
// its own conversation from the restored HOME (resumed_by load), the
// interrupted turn ended node_lost, the queued prompt run there, the log
// with no gap and everything from before, its checkpoints listed there and
// a rewind to one of them giving that turn's files; the host-path session
// stays stopped/node_lost with a failure saying why.
func TestClusterFailoverMovesSessionsWithTheirFiles(t *testing.T) {
	db := freshPostgres(t)
	// A server of the test's own: it is stopped and started again.
	s3 := testenv.StartOwnS3(t)
	a := storageNode(t, db, "node-a", s3.URL, s3.S3)
	b := storageNode(t, db, "node-b", s3.URL, s3.S3)
	c := storageNode(t, db, "node-c", s3.URL, s3.S3)

	busy, idle := a.create(t, nil), a.create(t, nil)
	pinned := a.create(t, map[string]any{"workspace": t.TempDir()})
	for _, s := range []berth.Session{busy, idle} {
		if !s.ManagedWorkspace || !strings.HasPrefix(s.Workspace, a.home) {
			t.Fatalf("managed workspace %s not under A's home", s.Workspace)
		}
		a.turn(t, s.ID, "write a.txt one")
		// The repository and what it ignores move too.
		testenv.WriteFile(t, filepath.Join(s.Workspace, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
		testenv.WriteFile(t, filepath.Join(s.Workspace, ".gitignore"), "*.log\n", 0o644)
		testenv.WriteFile(t, filepath.Join(s.Workspace, "build.log"), "ignored", 0o644)
		a.turn(t, s.ID, "write b.txt two")
		syncedTo(t, a, s.ID, lastOf(a.allEvents(t, s.ID), berth.EventTurnEnded).Seq)
	}
	a.turn(t, pinned.ID, "echo pinned")

	// The store's server is killed: a turn runs as fast as ever, the store
	// lags; it is started again: synced_seq catches up with that turn.
	s3.Stop()
	began := time.Now()
	if r := a.turn(t, idle.ID, "write c.txt three"); r.StopReason != "end_turn" {
		t.Fatalf("turn with the store down: %+v", r)
	}
	t.Logf("a turn with the object store down took %s", time.Since(began))
	ended := lastOf(a.allEvents(t, idle.ID), berth.EventTurnEnded).Seq
	if got := a.session(t, idle.ID); got.Storage == nil || got.Storage.SyncedSeq >= ended {
		t.Fatalf("synced with the store down: %+v", got.Storage)
	}
	s3.Start()
	syncedTo(t, a, idle.ID, ended)

	// busy writes a file in a turn that never completes, and has a prompt
	// queued behind it.
	var started struct {
		TurnID string `json:"turn_id"`
	}
	if st, _ := a.api("POST", "/v1/sessions/"+busy.ID+"/prompts", map[string]any{"text": "write c.txt interrupted\nsleep 30000"}, &started); st != 202 {
		t.Fatalf("prompt = %d", st)
	}
	a.waitLog(t, busy.ID, "the interrupted turn's write", func(evs []berth.Event) bool {
		for _, ev := range evs {
			if ev.Type == berth.EventAgentMessage && ev.TurnID == started.TurnID && strings.Contains(string(ev.Data), "wrote c.txt") {
				return true
			}
		}
		return false
	})
	var queued struct {
		Status string `json:"status"`
	}
	if st, _ := a.api("POST", "/v1/sessions/"+busy.ID+"/prompts", map[string]any{"text": "echo queued"}, &queued); st != 202 || queued.Status != "queued" {
		t.Fatalf("queue = %d %+v", st, queued)
	}
	before := map[string][]berth.Event{busy.ID: a.allEvents(t, busy.ID), idle.ID: a.allEvents(t, idle.ID)}
	// idle's checkpoints: before each of its three turns.
	var ckptsOnA struct{ Checkpoints []berth.Checkpoint }
	if st, _ := a.api("GET", "/v1/sessions/"+idle.ID+"/checkpoints", nil, &ckptsOnA); st != 200 || len(ckptsOnA.Checkpoints) != 3 {
		t.Fatalf("idle's checkpoints on A = %d %+v", st, ckptsOnA)
	}

	killed := time.Now()
	a.kill9()
	moved := map[string]berth.Session{}
	waitFor(t, 4*clusterTTL+20*time.Second, "both managed sessions active on another node", func() bool {
		for _, id := range []string{busy.ID, idle.ID} {
			got := b.session(t, id)
			// Until it is closed, the record is A's (active), its lease the
			// takeover's: a moved session has its new workspace.
			if got.State != berth.StateActive || (got.Node != "node-b" && got.Node != "node-c") || strings.HasPrefix(got.Workspace, a.home) {
				return false
			}
			moved[id] = got
		}
		return true
	})
	t.Logf("SIGKILL of A to both sessions active elsewhere: %s (lease_ttl %s)", time.Since(killed), clusterTTL)
	if moved[busy.ID].Node == moved[idle.ID].Node {
		t.Fatalf("both sessions moved to %s: the least-loaded node takes each", moved[busy.ID].Node)
	}
	homes := map[string]string{"node-b": b.home, "node-c": c.home}
	want := map[string][3]string{busy.ID: {"one", "two", ""}, idle.ID: {"one", "two", "three"}}
	for id, s := range moved {
		if want := filepath.Join(homes[s.Node], "workspaces", id); s.Workspace != want {
			t.Fatalf("%s moved to %s, workspace %s, want %s", id, s.Node, s.Workspace, want)
		}
		for i, name := range []string{"a.txt", "b.txt", "c.txt"} {
			fileIs(t, s.Workspace, name, want[id][i])
		}
		fileIs(t, s.Workspace, ".git/HEAD", "ref: refs/heads/main\n")
		fileIs(t, s.Workspace, "build.log", "ignored")
		evs := c.allEvents(t, id)
		assertContiguous(t, evs)
		for i, ev := range before[id] {
			if evs[i].Type != ev.Type || evs[i].TurnID != ev.TurnID {
				t.Fatalf("%s: event %d was %s, is %s", id, ev.Seq, ev.Type, evs[i].Type)
			}
		}
		var d struct {
			ResumedBy string `json:"resumed_by"`
		}
		_ = json.Unmarshal(lastOf(evs, berth.EventSessionStarted).Data, &d)
		if d.ResumedBy != "load" {
			t.Fatalf("%s resumed_by %q, want load", id, d.ResumedBy)
		}
		// Resumed once: one start, after the node_lost stop.
		stop, starts := lastOf(evs, berth.EventSessionStopped), 0
		for _, ev := range evs[len(before[id]):] {
			if ev.Type == berth.EventSessionStarted {
				starts++
			}
		}
		if stop == nil || stopReasonOf(*stop) != string(berth.StopNodeLost) || starts != 1 || stop.Seq > lastOf(evs, berth.EventSessionStarted).Seq {
			t.Fatalf("%s after the kill: %v", id, typesOf(evs[len(before[id]):]))
		}
	}
	// idle's checkpoints moved with it: listed on its new node, and a
	// rewind there to the one before its second turn gives the files of
	// its first.
	nodes := map[string]*server{"node-b": b, "node-c": c}
	there := nodes[moved[idle.ID].Node]
	var ckptsThere struct{ Checkpoints []berth.Checkpoint }
	if st, _ := there.api("GET", "/v1/sessions/"+idle.ID+"/checkpoints", nil, &ckptsThere); st != 200 ||
		!slices.EqualFunc(ckptsThere.Checkpoints, ckptsOnA.Checkpoints, func(x, y berth.Checkpoint) bool { return x.ID == y.ID && x.TurnID == y.TurnID }) {
		t.Fatalf("idle's checkpoints on %s = %d %+v, want A's %+v", moved[idle.ID].Node, st, ckptsThere, ckptsOnA)
	}
	if st, err := there.api("POST", "/v1/sessions/"+idle.ID+"/rewind", map[string]any{"checkpoint_id": ckptsOnA.Checkpoints[1].ID}, nil); st != 200 {
		t.Fatalf("rewind on %s to a checkpoint from before the move = %d %v", moved[idle.ID].Node, st, err)
	}
	for name, want := range map[string]string{"a.txt": "one", "b.txt": "", "c.txt": "", ".git/HEAD": "ref: refs/heads/main\n"} {
		fileIs(t, moved[idle.ID].Workspace, name, want)
	}
	// The interrupted turn ended node_lost; the queued prompt ran on the
	// new node.
	evs := b.waitLog(t, busy.ID, "the queued prompt run on the new node", func(evs []berth.Event) bool {
		for _, ev := range evs {
			if ev.Type == berth.EventAgentMessage && strings.Contains(string(ev.Data), "queued") {
				return true
			}
		}
		return false
	})
	interrupted := false
	for _, ev := range evs {
		if ev.Type == berth.EventTurnEnded && ev.TurnID == started.TurnID {
			interrupted = strings.Contains(string(ev.Data), `"node_lost"`)
		}
	}
	if !interrupted {
		t.Fatalf("the interrupted turn did not end node_lost: %v", turnStarts(evs))
	}
	got := b.session(t, pinned.ID)
	if got.State != berth.StateStopped || got.StopReason != berth.StopNodeLost || got.Failure == nil ||
		!strings.Contains(got.Failure.Message, "host path") {
		t.Fatalf("host-path session: %s/%s failure %+v", got.State, got.StopReason, got.Failure)
	}
	// Nothing of A's sessions runs on.
	waitFor(t, 2*clusterTTL, "A's shims gone", func() bool {
		for _, pid := range shimsOf(a.home) {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

// A node paused (SIGSTOP) past lease_ttl with a session in a turn: the
// session moves to the other node and goes on there. Resumed (SIGCONT),
// the paused node finds itself lost and lets go: its old agent is killed
// (and none of the new owner's, on the machine they share), and nothing it had of the session (its agent's late output, a stop) is
// written: the log stays contiguous with none of it, and the session
// stays active on the node it moved to.
func TestClusterFailoverPausedNodeFindsItsSessionMoved(t *testing.T) {
	db := freshPostgres(t)
	s3 := testenv.S3Server(t)
	a := storageNode(t, db, "node-a", s3.URL, s3)
	b := storageNode(t, db, "node-b", s3.URL, s3)
	sess := a.create(t, nil)
	a.turn(t, sess.ID, "write a.txt one")
	syncedTo(t, a, sess.ID, lastOf(a.allEvents(t, sess.ID), berth.EventTurnEnded).Seq)
	if st, _ := a.api("POST", "/v1/sessions/"+sess.ID+"/prompts", map[string]any{"text": "sleep 30000\necho late"}, nil); st != 202 {
		t.Fatalf("prompt on A = %d", st)
	}
	old := agentPIDs(sess.ID)
	if len(old) == 0 {
		t.Fatal("no agent process carries the session's id")
	}
	if err := syscall.Kill(a.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT)
		}
	}()
	moved := b.waitSession(t, sess.ID, "the session active on B", func(s berth.Session) bool {
		return s.State == berth.StateActive && s.Node == "node-b" && strings.HasPrefix(s.Workspace, b.home)
	})
	fileIs(t, moved.Workspace, "a.txt", "one")
	var fresh []int
	for _, pid := range agentPIDs(sess.ID) {
		if !slices.Contains(old, pid) {
			fresh = append(fresh, pid)
		}
	}
	if len(fresh) == 0 {
		t.Fatal("no agent of B carries the session's id")
	}
	_ = syscall.Kill(a.cmd.Process.Pid, syscall.SIGCONT)
	paused = false

	waitFor(t, 3*clusterTTL, "A finding itself lost", func() bool { return strings.Contains(a.log.String(), "marked lost") })
	waitFor(t, 3*clusterTTL, "A's old agent gone", func() bool {
		for _, pid := range old {
			if alive(pid) {
				return false
			}
		}
		return true
	})
	// On a machine it shares with B, A kills none of B's processes of it.
	for _, pid := range fresh {
		if !alive(pid) {
			t.Fatalf("B's agent %d of the session was killed", pid)
		}
	}
	if r := b.turn(t, sess.ID, "echo moved"); r.Text != "moved" {
		t.Fatalf("prompt on B after A's return: %+v", r)
	}
	waitFor(t, 3*clusterTTL, "A seeing the session driven by B", func() bool {
		got := a.session(t, sess.ID)
		return got.State == berth.StateActive && got.Node == "node-b"
	})
	evs := b.allEvents(t, sess.ID)
	assertContiguous(t, evs)
	for _, ev := range evs {
		if ev.Type == berth.EventAgentMessage && strings.Contains(string(ev.Data), "late") {
			t.Fatalf("the paused node's agent output was logged: %s", ev.Data)
		}
	}
}

// A parent and the child it spawned (in its workspace) on node A: A is
// SIGKILLed, and the tree moves whole: both come back active on the same
// other node, the parent first (a child resumes only while its parent is
// active on its node), the child still the parent's (parent_id), in the
// parent's workspace restored there with what the child wrote in it, its
// agent reloading its own conversation from its own HOME, and a prompt
// to it answered.
func TestClusterFailoverMovesATreeWhole(t *testing.T) {
	db := freshPostgres(t)
	s3 := testenv.S3Server(t)
	a := storageNode(t, db, "node-a", s3.URL, s3)
	b := storageNode(t, db, "node-b", s3.URL, s3)
	c := storageNode(t, db, "node-c", s3.URL, s3)

	parent := a.create(t, nil)
	var kid berth.Session
	if st, err := a.api("POST", "/v1/sessions/"+parent.ID+"/children", map[string]any{"agent": "demo", "ttl_seconds": 600}, &kid); st != 201 {
		t.Fatalf("spawn = %d %v", st, err)
	}
	if kid.ParentID != parent.ID || kid.Workspace != parent.Workspace || kid.ManagedWorkspace {
		t.Fatalf("child %+v of %s", kid, parent.Workspace)
	}
	a.turn(t, kid.ID, "write k.txt kid")
	// The parent's workspace reaches the store with its turns: this one
	// carries what the child wrote.
	a.turn(t, parent.ID, "write p.txt parent")
	for _, id := range []string{kid.ID, parent.ID} {
		syncedTo(t, a, id, lastOf(a.allEvents(t, id), berth.EventTurnEnded).Seq)
	}

	killed := time.Now()
	a.kill9()
	var moved map[string]berth.Session
	waitFor(t, 4*clusterTTL+30*time.Second, "parent and child active on another node", func() bool {
		moved = map[string]berth.Session{}
		for _, id := range []string{parent.ID, kid.ID} {
			got := b.session(t, id)
			if got.State != berth.StateActive || (got.Node != "node-b" && got.Node != "node-c") || strings.HasPrefix(got.Workspace, a.home) {
				return false
			}
			moved[id] = got
		}
		return true
	})
	t.Logf("SIGKILL of A to the tree active elsewhere: %s (lease_ttl %s)", time.Since(killed), clusterTTL)
	p, k := moved[parent.ID], moved[kid.ID]
	if p.Node != k.Node {
		t.Fatalf("the parent moved to %s, its child to %s: a tree moves whole", p.Node, k.Node)
	}
	homes := map[string]string{"node-b": b.home, "node-c": c.home}
	if want := filepath.Join(homes[p.Node], "workspaces", parent.ID); p.Workspace != want || k.Workspace != want {
		t.Fatalf("workspaces on %s: parent %s, child %s, want %s", p.Node, p.Workspace, k.Workspace, want)
	}
	if k.ParentID != parent.ID || k.RootID != parent.ID || k.Depth != 1 {
		t.Fatalf("moved child: parent_id %q root_id %q depth %d", k.ParentID, k.RootID, k.Depth)
	}
	fileIs(t, p.Workspace, "k.txt", "kid")
	fileIs(t, p.Workspace, "p.txt", "parent")
	nodes := map[string]*server{"node-b": b, "node-c": c}
	there := nodes[p.Node]
	evs := there.allEvents(t, kid.ID)
	assertContiguous(t, evs)
	var d struct {
		ResumedBy string `json:"resumed_by"`
	}
	_ = json.Unmarshal(lastOf(evs, berth.EventSessionStarted).Data, &d)
	if d.ResumedBy != "load" {
		t.Fatalf("the child resumed_by %q, want load", d.ResumedBy)
	}
	// The parent came back first: its session_started is older than the
	// child's.
	pStarted, kStarted := lastOf(there.allEvents(t, parent.ID), berth.EventSessionStarted), lastOf(evs, berth.EventSessionStarted)
	if pStarted.Time.After(kStarted.Time) {
		t.Fatalf("the parent started at %s, after its child (%s)", pStarted.Time, kStarted.Time)
	}
	if r := there.turn(t, kid.ID, "echo moved kid"); r.Text != "moved kid" {
		t.Fatalf("prompt to the moved child: %+v", r)
	}
}
