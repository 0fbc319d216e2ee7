package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// subcommand returns the command of root at path ("create"), or fails.
func subcommand(t *testing.T, root *cobra.Command, path ...string) *cobra.Command {
	t.Helper()
	c, _, err := root.Find(path)
	if err != nil || c == root {
		t.Fatalf("no command %v: %v", path, err)
	}
	return c
}

// TestPermissionsFlag: create, run and spawn take the permission mode as
// --permissions; --mode still sets it there, hidden from the help, with a
// one-line notice on stderr; set's --mode stays the agent's mode.
func TestPermissionsFlag(t *testing.T) {
	for _, name := range []string{"create", "run", "spawn"} {
		for _, flag := range []string{"--permissions", "--mode"} {
			cmd := subcommand(t, newRootCommand(), name)
			// cobra prints a flag's notice by Print: to stderr unless an
			// output is set, as here.
			var stderr bytes.Buffer
			cmd.SetOut(&stderr)
			if err := cmd.ParseFlags([]string{flag, "deny-all"}); err != nil {
				t.Fatalf("%s %s: %v", name, flag, err)
			}
			if got := cmd.Flag("permissions").Value.String(); got != "deny-all" {
				t.Errorf("%s %s deny-all: the permission mode is %q", name, flag, got)
			}
			notice := strings.TrimSpace(stderr.String())
			switch {
			case flag == "--mode" && (!strings.Contains(notice, "deprecated") || !strings.Contains(notice, "--permissions") || strings.Count(notice, "\n") != 0):
				t.Errorf("%s --mode: notice %q, want one line naming --permissions", name, notice)
			case flag == "--permissions" && notice != "":
				t.Errorf("%s --permissions: stderr %q", name, notice)
			}
		}
		help := subcommand(t, newRootCommand(), name).UsageString()
		if !strings.Contains(help, "--permissions") || strings.Contains(help, "--mode") {
			t.Errorf("berth %s --help lists --mode or not --permissions:\n%s", name, help)
		}
	}
	set := subcommand(t, newRootCommand(), "set")
	if set.Flag("permissions") != nil || set.Flag("mode") == nil || set.Flag("mode").Hidden {
		t.Error("berth set: --mode is not the agent's mode")
	}
}
