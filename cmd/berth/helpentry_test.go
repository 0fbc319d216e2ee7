package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-sh/berth/cmd/berth/internal/helpentry"
)

var updateHelp = flag.Bool("update", false, "rewrite cmd/berth/internal/helpentry/root.go from the command tree")

// treeHelp is `berth --help` as the command tree prints it.
func treeHelp(t *testing.T) string {
	t.Helper()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// The help the early entry prints is the command tree's, word for word:
// a command, a flag or a line added to the tree fails here until root.go
// is written again (-update).
func TestTheEarlyHelpIsTheTreesHelp(t *testing.T) {
	want := treeHelp(t)
	if *updateHelp {
		if strings.Contains(want, "`") {
			t.Fatal("the help holds a backquote: root.go cannot keep it in a raw string")
		}
		src := "package helpentry\n\n" +
			"// Root is `berth --help`, as the command tree prints it. Written by\n" +
			"// TestTheEarlyHelpIsTheTreesHelp (go test ./cmd/berth -run\n" +
			"// TestTheEarlyHelpIsTheTreesHelp -update); do not edit.\n" +
			"const Root = `" + want + "`\n"
		if err := os.WriteFile("internal/helpentry/root.go", []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if helpentry.Root != want {
		t.Fatalf("the early help differs from the tree's (go test ./cmd/berth -run TestTheEarlyHelpIsTheTreesHelp -update):\n--- early\n%s\n--- tree\n%s", helpentry.Root, want)
	}
}

// `berth --help`, `-h` and `help` alone print the tree's help from an init
// function, before any of the daemon's libraries (nor the tree itself) is
// initialised; with anything beside them, the tree answers, the same text
// for the root.
func TestTheRootHelpSkipsTheDaemonsLibraries(t *testing.T) {
	plain := plainBerth(t)
	want := treeHelp(t)
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		skipsDaemonLibraries(t, plain, args...)
		out, err := exec.Command(plain, args...).Output()
		if err != nil || string(out) != want {
			t.Errorf("berth %q printed (%v):\n%s\nwant the tree's:\n%s", args, err, out, want)
		}
	}
	// Beside another argument the tree answers, libraries and all.
	if got := inits(t, plain, "--help", "--addr=x"); !got["github.com/spf13/cobra"] {
		t.Errorf("berth --help --addr=x did not go through the command tree")
	}
	out, err := exec.Command(plain, "--addr=x", "--help").Output()
	if err != nil || string(out) != want {
		t.Errorf("berth --addr=x --help printed (%v): %s", err, out)
	}
}
