package checkpoint

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
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

// ChangesAfter, reading a session's checkpoints one after another, gives
// each as changes that, applied to the one before, are exactly what
// Entries gives, and reads only the manifests above the one before (one,
// each a delta on the last) rather than the whole chain down to a full
// manifest again; a checkpoint whose chain does not pass through the one
// before is read whole.
func TestChangesAfterReadsOnlyTheDeltasAbove(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, Options{})
	ws := t.TempDir()
	write(t, ws, "keep.txt", "keep", 0o644)
	write(t, ws, "d/e/f.txt", "deep", 0o644)
	// Enough files that each change is small: a delta, not whole.
	for i := range 12 {
		write(t, ws, "fill/"+strconv.Itoa(i), "fill", 0o644)
	}
	changes := []func(){
		func() { write(t, ws, "new.txt", "new", 0o644) },
		func() { write(t, ws, "keep.txt", "changed", 0o600) },
		func() { mustRemove(t, filepath.Join(ws, "d")) },
		func() { write(t, ws, "d", "a file where a directory was", 0o644) },
		func() { mustRemove(t, filepath.Join(ws, "new.txt")) },
		func() {},
	}
	var made []string
	for i := range len(changes) + 1 {
		if i > 0 {
			changes[i-1]()
		}
		ck, err := s.Create(ctx, "ses_a", "turn_"+strconv.Itoa(i), ws)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, ck.ID)
	}
	var prev *Resolved
	have := map[string]Entry{}
	for i, id := range made {
		_, want, err := s.Entries("ses_a", id)
		if err != nil {
			t.Fatal(err)
		}
		before := s.manifestReads.Load()
		ch, read, err := s.ChangesAfter("ses_a", id, prev)
		if err != nil || ch.Meta.ID != id || (i == 0) != (ch.Whole != nil) {
			t.Fatalf("checkpoint %d: %+v, %v", i, ch, err)
		}
		if n := s.manifestReads.Load() - before; i > 0 && n != 1 {
			t.Fatalf("checkpoint %d read %d manifests after the one before, want 1", i, n)
		}
		for _, e := range ch.Whole {
			have[e.Path] = e
		}
		for _, p := range ch.Removed {
			delete(have, p)
		}
		for _, e := range ch.Changed {
			have[e.Path] = e
		}
		got := slices.SortedFunc(maps.Values(have), func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
		if !slices.Equal(got, want) {
			t.Fatalf("checkpoint %d: the changes give %v, Entries %v", i, got, want)
		}
		if i == len(made)-1 && (len(ch.Changed) != 0 || len(ch.Removed) != 0) {
			t.Fatalf("a checkpoint of an unchanged workspace changes %+v", ch)
		}
		prev = read
	}
	// One whose chain does not pass through the one before: read whole.
	before := s.manifestReads.Load()
	ch, _, err := s.ChangesAfter("ses_a", made[2], prev)
	if err != nil || ch.Whole == nil {
		t.Fatalf("an earlier checkpoint: %+v, %v", ch, err)
	}
	if n := s.manifestReads.Load() - before; n < 3 {
		t.Fatalf("an earlier checkpoint read %d manifests, want its chain's", n)
	}
}

// ChangesAfter checks what a delta changes as a whole manifest is
// checked: a path left below a directory gone, a path below a file, a bad
// hash are damage (EInternal), and the entries read before are left
// as they were.
func TestChangesAfterRefusesDamagedDeltas(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		delta []Entry
	}{
		{"a directory removed, a path left below it", []Entry{{Path: "d", Kind: kindRemoved}}},
		{"a directory now a file, a path left below it", []Entry{{Path: "d", Kind: KindFile, Hash: strings.Repeat("a", 64)}}},
		{"a path below a file", []Entry{{Path: "keep.txt/x", Kind: KindFile, Hash: strings.Repeat("a", 64)}}},
		{"a bad hash", []Entry{{Path: "d/g", Kind: KindFile, Hash: "nope"}}},
		{"a path out of the workspace", []Entry{{Path: "../x", Kind: KindDir}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Options{})
			ws := t.TempDir()
			write(t, ws, "keep.txt", "keep", 0o644)
			write(t, ws, "d/f.txt", "deep", 0o644)
			first, err := s.Create(ctx, "ses_a", "turn_1", ws)
			if err != nil {
				t.Fatal(err)
			}
			write(t, ws, "more.txt", "more", 0o644)
			second, err := s.Create(ctx, "ses_a", "turn_2", ws)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.entriesPath("ses_a", second.ID), encodeManifest(first.ID, tc.delta), 0o600); err != nil {
				t.Fatal(err)
			}
			_, prev, err := s.ChangesAfter("ses_a", first.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.ChangesAfter("ses_a", second.ID, prev); !berth.IsCode(err, berth.EInternal) {
				t.Fatalf("ChangesAfter: %v, want EInternal", err)
			}
			if len(prev.byPath) != 3 {
				t.Fatalf("the entries read before were changed: %v", prev.byPath)
			}
		})
	}
}

// mustRemove removes p and what it holds.
func mustRemove(t *testing.T, p string) {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
}
