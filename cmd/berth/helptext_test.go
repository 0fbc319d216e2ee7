package main

import (
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
				t.Errorf("berth %s --%s: help %q names its value by the back-quoted words", c.CommandPath(), f.Name, f.Usage)
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
