package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

// berth checkpoints lists the checkpoint of each turn, berth rewind
// restores one, berth fork starts a session from one; -o json is the API's
// JSON; [checkpoints] enabled = false (from the environment) turns them off.
func TestCheckpointsRewindForkCLI(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	s.cli(t, "prompt", sess.ID, "--wait", "write a.txt one")
	s.cli(t, "prompt", sess.ID, "--wait", "write a.txt two")

	out := s.cli(t, "checkpoints", sess.ID)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CHECKPOINT") || !strings.HasPrefix(lines[2], "ckpt_") {
		t.Fatalf("berth checkpoints:\n%s", out)
	}
	var list struct{ Checkpoints []berth.Checkpoint }
	if err := json.Unmarshal([]byte(s.cli(t, "-o", "json", "checkpoints", sess.ID)), &list); err != nil || len(list.Checkpoints) != 2 {
		t.Fatalf("checkpoints -o json: %v %+v", err, list)
	}
	second := list.Checkpoints[1].ID
	if !strings.HasPrefix(lines[2], second) {
		t.Fatalf("the table's order is not the API's:\n%s", out)
	}
	// Each checkpoint is shown beside the prompt of the turn it came before.
	if !strings.Contains(lines[0], "PROMPT") || !strings.Contains(lines[1], "write a.txt one") || !strings.Contains(lines[2], "write a.txt two") {
		t.Fatalf("berth checkpoints does not show the turns' prompts:\n%s", out)
	}

	if out := s.cli(t, "rewind", sess.ID, second); !strings.Contains(out, "rewound "+sess.ID+" to "+second) {
		t.Fatalf("berth rewind: %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(sess.Workspace, "a.txt")); string(b) != "one" {
		t.Fatalf("a.txt after rewind: %q", b)
	}
	if out := s.cli(t, "logs", sess.ID); !strings.Contains(out, "workspace_rewound") || !strings.Contains(out, "to="+second) ||
		!strings.Contains(out, "checkpoint_created") || !strings.Contains(out, second+" files=1") {
		t.Fatalf("berth logs:\n%s", out)
	}
	if code, _ := s.cliFails(t, "rewind", sess.ID, "ckpt_01jzzzzzzzzzzzzzzzzzzzzzzz"); code != 3 {
		t.Fatalf("rewind to no checkpoint: exit %d", code)
	}
	// With -o json the error is one JSON object, the exit code the same.
	code, out := s.cliFails(t, "-o", "json", "rewind", sess.ID, "ckpt_01jzzzzzzzzzzzzzzzzzzzzzzz")
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(out), &e); code != 3 || err != nil || e.Error.Code != berth.ENotFound || e.Error.Message == "" {
		t.Fatalf("rewind -o json to no checkpoint: exit %d, %q (%v)", code, out, err)
	}

	var fork berth.Session
	raw := s.cli(t, "-o", "json", "fork", sess.ID, second, "--name", "retry")
	if err := json.Unmarshal([]byte(raw), &fork); err != nil || fork.ForkedFrom == nil || fork.ForkedFrom.CheckpointID != second || fork.Name != "retry" {
		t.Fatalf("fork -o json: %v %s", err, raw)
	}
	if b, _ := os.ReadFile(filepath.Join(fork.Workspace, "a.txt")); string(b) != "one" {
		t.Fatalf("the fork's a.txt: %q", b)
	}
	if out := s.cli(t, "fork", sess.ID, list.Checkpoints[0].ID); !strings.Contains(out, "forked from "+sess.ID) {
		t.Fatalf("berth fork: %q", out)
	}
	// -q: the new id alone, -o json or not (as create -q); ls -q: the ids.
	quietFork := s.cli(t, "-o", "json", "fork", "-q", sess.ID, second)
	if !strings.HasPrefix(quietFork, "ses_") || strings.Count(quietFork, "\n") != 1 || strings.ContainsAny(strings.TrimSpace(quietFork), " {") {
		t.Fatalf("fork -q: %q", quietFork)
	}
	ids := strings.Fields(s.cli(t, "ls", "-q"))
	if len(ids) != 4 || !slices.Contains(ids, sess.ID) || !slices.Contains(ids, fork.ID) || !slices.Contains(ids, strings.TrimSpace(quietFork)) {
		t.Fatalf("ls -q: %q", ids)
	}
	if out := s.cli(t, "show", fork.ID); !strings.Contains(out, sess.ID+" at "+second) {
		t.Fatalf("berth show of a fork:\n%s", out)
	}

	off := startServerEnv(t, t.TempDir(), []string{"BERTH_CHECKPOINTS_ENABLED=false"})
	quiet := off.create(t, nil)
	off.cli(t, "prompt", quiet.ID, "--wait", "write a.txt one")
	if out := strings.TrimSpace(off.cli(t, "checkpoints", quiet.ID)); strings.Contains(out, "ckpt_") {
		t.Fatalf("checkpoints taken though off:\n%s", out)
	}
}

// storeBytes is the size of every file under the checkpoint store's
// blobs, temporary ones included.
func storeBytes(home string) int64 {
	var n int64
	_ = filepath.WalkDir(filepath.Join(home, "checkpoints", "blobs"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// The attack that filled the disk, as it was made: with its berth MCP
// credential a parent's agent spawns a child, then loops "write five
// random files, prompt_child" in one turn, each of the child's turns
// checkpointing 5 MiB more. With [checkpoints] max_tree_bytes = 10 MiB the
// store grows by at most the cap (and, for a moment, the checkpoints being
// written), not by the 50 MiB the loop writes; the tree's oldest
// checkpoints are pruned, each logged checkpoint_pruned, and answer 404
// "pruned" to rewind and fork; another tree's checkpoints are untouched.
func TestCheckpointFloodStaysUnderTheTreeCap(t *testing.T) {
	const (
		limit  = 10 << 20
		rounds = 10
		round  = 5 << 20
	)
	home := shortHome(t)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(fmt.Sprintf("[checkpoints]\nmax_tree_bytes = %d\n", limit)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerEnv(t, home, providerEnv())
	box := s.isolated(t)

	other := s.createRoot(t, map[string]any{"sandbox": box})
	for _, text := range []string{"run head -c 1048576 /dev/urandom > mine", "echo the other tree"} {
		if st, err := s.api("POST", "/v1/sessions/"+other.ID+"/prompts?wait=true", map[string]string{"text": text}, nil); st != 200 {
			t.Fatalf("%q = %d %v", text, st, err)
		}
	}
	var otherList struct{ Checkpoints []berth.Checkpoint }
	for deadline := time.Now().Add(10 * time.Second); len(otherList.Checkpoints) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s.api("GET", "/v1/sessions/"+other.ID+"/checkpoints", nil, &otherList)
	}
	if len(otherList.Checkpoints) != 2 {
		t.Fatalf("the other tree's checkpoints: %+v", otherList)
	}
	base := storeBytes(home)

	parent := s.createRoot(t, map[string]any{"sandbox": box})
	var kid berth.SpawnChildResult
	s.berthTool(t, parent.ID, "spawn_child", map[string]any{"ttl_seconds": 300}).ok(t, &kid)
	var loop strings.Builder
	for range rounds {
		loop.WriteString("run for i in 1 2 3 4 5; do head -c 1048576 /dev/urandom > f$i; done\n")
		fmt.Fprintf(&loop, "mcp berth prompt_child {\"child_id\":%q,\"text\":\"echo again\",\"wait\":true}\n", kid.ChildID)
	}

	// The store's size, sampled while the loop runs.
	var (
		peak atomic.Int64
		wg   sync.WaitGroup
	)
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			peak.Store(max(peak.Load(), storeBytes(home)-base))
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var r berth.TurnResult
	st, err := s.api("POST", "/v1/sessions/"+parent.ID+"/prompts?wait=true", map[string]string{"text": loop.String()}, &r)
	// The last prune ends after the child's last turn.
	for deadline := time.Now().Add(20 * time.Second); storeBytes(home)-base > limit && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	close(done)
	wg.Wait()
	if st != 200 || r.StopReason != "end_turn" || strings.Count(r.Text, "again") != rounds {
		t.Fatalf("the loop = %d %v %+v", st, err, r)
	}
	// Settled: the checkpoint taken ahead for the next turn may hold its
	// new blobs a moment before its commit prunes.
	grown := storeBytes(home) - base
	for deadline := time.Now().Add(20 * time.Second); grown > limit && time.Now().Before(deadline); grown = storeBytes(home) - base {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the loop wrote %d bytes; the store grew by %d, at most %d on the way (cap %d)", rounds*round, grown, peak.Load(), limit)
	if grown > limit {
		t.Fatalf("the store grew by %d bytes, cap %d", grown, limit)
	}
	// At most the cap, the newest checkpoint, the one taken ahead for the
	// next turn and one being written: a prompt_child comes back quickly
	// enough (`berth mcp` a relay) that a round can land before the last
	// one's prune has run. Still well under the 50 MiB the loop writes.
	if p := peak.Load(); p > limit+4*round {
		t.Fatalf("the store grew by up to %d bytes while the loop ran, cap %d", p, limit)
	}

	var pruned []map[string]any
	for _, id := range []string{parent.ID, kid.ChildID} {
		for _, ev := range s.allEvents(t, id) {
			if ev.Type == berth.EventCheckpointPruned {
				var d map[string]any
				_ = json.Unmarshal(ev.Data, &d)
				if d["session_id"] != id || d["turn_id"] == "" || d["freed_bytes"] == nil || d["tree_bytes"] == nil {
					t.Fatalf("in %s's log: checkpoint_pruned %v", id, d)
				}
				pruned = append(pruned, d)
			}
		}
	}
	if len(pruned) < rounds-3 {
		t.Fatalf("%d checkpoints pruned: %v", len(pruned), pruned)
	}
	var kidList struct{ Checkpoints []berth.Checkpoint }
	s.api("GET", "/v1/sessions/"+kid.ChildID+"/checkpoints", nil, &kidList)
	for _, d := range pruned {
		if d["session_id"] != kid.ChildID {
			continue
		}
		for _, c := range kidList.Checkpoints {
			if c.ID == d["checkpoint_id"] {
				t.Fatalf("pruned %s is still listed", c.ID)
			}
		}
		var e struct{ Error berth.Error }
		for _, op := range []string{"rewind", "fork"} {
			if st, _ := s.api("POST", "/v1/sessions/"+kid.ChildID+"/"+op, map[string]any{"checkpoint_id": d["checkpoint_id"]}, &e); st != 404 ||
				e.Error.Code != berth.ENotFound || !strings.Contains(e.Error.Message, "pruned") {
				t.Fatalf("%s to pruned %s = %d %+v", op, d["checkpoint_id"], st, e)
			}
		}
	}

	// The other tree: every checkpoint listed, none pruned, rewound.
	var after struct{ Checkpoints []berth.Checkpoint }
	s.api("GET", "/v1/sessions/"+other.ID+"/checkpoints", nil, &after)
	if len(after.Checkpoints) != 2 || after.Checkpoints[1].ID != otherList.Checkpoints[1].ID {
		t.Fatalf("the other tree lists %+v", after)
	}
	for _, ev := range s.allEvents(t, other.ID) {
		if ev.Type == berth.EventCheckpointPruned {
			t.Fatalf("the other tree logged %s", ev.Data)
		}
	}
	if st, err := s.api("POST", "/v1/sessions/"+other.ID+"/rewind", map[string]any{"checkpoint_id": after.Checkpoints[1].ID}, nil); st != 200 {
		t.Fatalf("rewind of the other tree = %d %v", st, err)
	}
}

// A checkpoint's prompt cell is the prompt's first line, cut and escaped.
func TestPromptCell(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "-",
		"  fix the tests\nthen run": "fix the tests",
		strings.Repeat("x", 50):     strings.Repeat("x", maxPromptCell-1) + "…",
		"ring \a the bell":          `ring \x07 the bell`,
	} {
		if got := promptCell(in); got != want {
			t.Errorf("promptCell(%q) = %q, want %q", in, got, want)
		}
	}
}
