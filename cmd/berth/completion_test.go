package main

import (
	"os/exec"
	"strings"
	"testing"
)

// Tab after a command that takes a session offers the daemon's session
// ids (those starting with what was typed), described, and never files.
func TestCompletionOffersSessionIDs(t *testing.T) {
	home := t.TempDir()
	s := startServer(t, home)
	var ids []string
	for _, name := range []string{"first", "second"} {
		sess := s.create(t, map[string]any{"name": name})
		ids = append(ids, sess.ID)
	}
	complete := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"__complete"}, args...)...)
		cmd.Env = s.cliEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		return string(out)
	}
	for _, command := range []string{"show", "logs", "prompt", "stop", "rm", "approve", "exec"} {
		out := complete(command, "")
		for _, id := range ids {
			if !strings.Contains(out, id+"\t") {
				t.Errorf("berth %s <Tab> does not offer %s:\n%s", command, id, out)
			}
		}
		if !strings.Contains(out, "first (demo, idle)") || !strings.HasSuffix(strings.TrimSpace(out), ":4") {
			t.Errorf("berth %s <Tab>: no description or files offered:\n%s", command, out)
		}
	}
	// A prefix narrows it to one; a second argument is not a session.
	if out := complete("show", ids[1][:len(ids[1])-3]); strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) {
		t.Errorf("prefix of %s offered:\n%s", ids[1], out)
	}
	if out := complete("show", ids[0], ""); strings.Contains(out, "ses_") {
		t.Errorf("second argument offered sessions:\n%s", out)
	}
}
