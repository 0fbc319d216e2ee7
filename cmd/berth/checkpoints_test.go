package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// berth checkpoints lists the checkpoint of each turn, berth rewind
// restores one, berth fork starts a session from one; -o json is the API's
// JSON; [checkpoints] enabled = false (from the environment) turns them off.
func TestCheckpointsRewindForkCLI(t *testing.T) {
	s := startServer(t, t.TempDir())
	var sess berth.Session
	s.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host"}, &sess)
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
	if out := s.cli(t, "show", fork.ID); !strings.Contains(out, sess.ID+" at "+second) {
		t.Fatalf("berth show of a fork:\n%s", out)
	}

	off := startServerEnv(t, t.TempDir(), []string{"BERTH_CHECKPOINTS_ENABLED=false"})
	var quiet berth.Session
	off.api("POST", "/v1/sessions", map[string]any{"agent": "demo", "sandbox": "host"}, &quiet)
	off.cli(t, "prompt", quiet.ID, "--wait", "write a.txt one")
	if out := strings.TrimSpace(off.cli(t, "checkpoints", quiet.ID)); strings.Contains(out, "ckpt_") {
		t.Fatalf("checkpoints taken though off:\n%s", out)
	}
}
