package checkpoint

import (
	"context"
	"slices"
	"testing"
)

// A checkpoint's walk leaves out the repository's .git and what its
// .gitignore files name; a Whole walk (a workspace that moves to another
// node) keeps them, and still leaves out hidden paths.
func TestScanWholeKeepsGitAndIgnoredPaths(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, ".git/config", "[core]\n", 0o644)
	write(t, dir, ".git/objects/ab/cdef", "blob", 0o444)
	write(t, dir, ".gitignore", "*.log\nbuild/\n", 0o644)
	write(t, dir, "run.log", "log", 0o644)
	write(t, dir, "build/out.bin", "bin", 0o755)
	write(t, dir, "src/main.go", "package main", 0o644)
	write(t, dir, "secret/token", "hidden", 0o600)
	scan := func(opts Options) []string {
		var paths []string
		_, _, err := Scan(context.Background(), dir, opts, []string{dir + "/secret"}, func(e Entry, _ *ScanFile) error {
			paths = append(paths, e.Path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return paths
	}
	if got, want := scan(Options{}), []string{".gitignore", "src", "src/main.go"}; !slices.Equal(got, want) {
		t.Fatalf("a checkpoint's walk: %v, want %v", got, want)
	}
	want := []string{".git", ".git/config", ".git/objects", ".git/objects/ab", ".git/objects/ab/cdef", ".gitignore",
		"build", "build/out.bin", "run.log", "src", "src/main.go"}
	if got := scan(Options{Whole: true}); !slices.Equal(got, want) {
		t.Fatalf("a whole walk: %v, want %v", got, want)
	}
}
