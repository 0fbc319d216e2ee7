package main

import (
	"os/exec"
	"slices"
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

// Tab after a flag that takes a known value offers it: --agent the
// daemon's agents, --permissions (and the old --mode of create) the
// permission modes, set's --mode and --model what the session on the
// line offers (nothing without one); never files.
func TestCompletionOffersFlagValues(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	complete := func(args ...string) []string {
		cmd := exec.Command(bin, append([]string{"__complete"}, args...)...)
		cmd.Env = s.cliEnv()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("__complete %v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if last := lines[len(lines)-1]; last != ":4" {
			t.Errorf("__complete %v: directive %q, want :4 (no files)", args, last)
		}
		var values []string
		for _, l := range lines[:len(lines)-1] {
			v, _, _ := strings.Cut(l, "\t")
			values = append(values, v)
		}
		return values
	}
	has := func(what string, got []string, want ...string) {
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: %q does not offer %q", what, got, w)
			}
		}
	}
	for _, c := range []string{"create", "run", "spawn", "ls"} {
		has(c+" --agent", complete(c, "--agent", ""), "demo")
	}
	if got := complete("create", "--agent", "de"); !slices.Equal(got, []string{"demo"}) {
		t.Errorf("create --agent de<Tab>: %q", got)
	}
	for _, c := range [][]string{{"create", "--permissions"}, {"run", "--permissions"}, {"spawn", sess.ID, "--permissions"}, {"create", "--mode"}} {
		if got := complete(append(c, "")...); !slices.Equal(got, permissionModes) {
			t.Errorf("%v <Tab>: %q, want %q", c, got, permissionModes)
		}
	}
	has("set ID --model", complete("set", sess.ID, "--model", ""), "demo-large")
	has("set ID --mode", complete("set", sess.ID, "--mode", ""), "plan")
	if got := complete("set", "--model", ""); len(got) != 0 {
		t.Errorf("set --model with no session offered %q", got)
	}
}
