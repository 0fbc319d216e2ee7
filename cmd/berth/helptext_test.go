package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagHelpHasNoBackticks: pflag takes a back-quoted word in a flag's
// help for the name of its value, so "this many `berth serve` nodes" read
// "--cluster berth serve" in `berth bench --help`.
func TestFlagHelpHasNoBackticks(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: help %q names its value by the back-quoted words", c.CommandPath(), f.Name, f.Usage)
			}
		}
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}

// TestVersionSaysWhatItKnows: a build that recorded no version or
// revision (go run) says so beside "dev", with its Go version.
func TestVersionSaysWhatItKnows(t *testing.T) {
	v := versionString()
	if v == "dev" || !strings.HasPrefix(v, "dev") || !strings.Contains(v, "go") && !strings.Contains(v, "1.") {
		t.Fatalf("version %q says nothing of the build", v)
	}
}

// berthRef is a command a help text tells the user to run: its name and
// the word after it.
var berthRef = regexp.MustCompile(`\bberth ([a-z][a-z-]*)(?: ([^\s,;)]+))?`)

// TestHelpPointsAtCommandsAsTheyAreRun: a help text that names a command
// whose first argument is required (a session's ID) gives that argument:
// create --help pointed at `berth snapshot --list`, which needs an id.
func TestHelpPointsAtCommandsAsTheyAreRun(t *testing.T) {
	root := newRootCommand()
	check := func(where, text string) {
		for _, m := range berthRef.FindAllStringSubmatch(text, -1) {
			target, _, err := root.Find([]string{m[1]})
			if err != nil || target == root {
				continue
			}
			use := strings.Fields(target.Use)
			needsArg := len(use) > 1 && !strings.HasPrefix(use[1], "[") && !strings.HasPrefix(use[1], "-") && strings.ToUpper(use[1]) == use[1]
			if needsArg && (m[2] == "" || strings.HasPrefix(m[2], "-")) {
				t.Errorf("%s: %q leaves out %s's %s", where, m[0], m[1], use[1])
			}
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check(c.CommandPath()+" (short)", c.Short)
		check(c.CommandPath()+" (long)", c.Long)
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { check(c.CommandPath()+" --"+f.Name, f.Usage) })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// The daemon's start builds only the root and serve (newDaemonRootCommand):
// serve's flags, the root's and the help they make are those of the whole
// tree, and a bad flag is the same usage error.
func TestTheDaemonsTreeIsTheWholeTreesServe(t *testing.T) {
	find := func(root *cobra.Command) *cobra.Command {
		c, _, err := root.Find([]string{"serve"})
		if err != nil || c.Name() != "serve" {
			t.Fatalf("serve not found: %v", err)
		}
		return c
	}
	whole, daemon := find(newRootCommand()), find(newDaemonRootCommand())
	if a, b := whole.UsageString(), daemon.UsageString(); a != b {
		t.Fatalf("serve's usage differs:\nwhole tree:\n%s\ndaemon's tree:\n%s", a, b)
	}
	for _, root := range []*cobra.Command{newRootCommand(), newDaemonRootCommand()} {
		root.SetArgs([]string{"serve", "--no-such-flag"})
		root.SetOut(new(strings.Builder))
		root.SetErr(new(strings.Builder))
		if err := root.Execute(); exitCode(err) != 2 {
			t.Fatalf("serve --no-such-flag: %v (exit %d), want a usage error", err, exitCode(err))
		}
	}
}
