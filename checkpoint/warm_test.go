package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warmWorkspace is a workspace with nested directories, an ignored
// directory and a first checkpoint taken, so that a warm capture compares
// with it.
func warmWorkspace(t *testing.T) (*Store, string) {
	t.Helper()
	ws := t.TempDir()
	write(t, ws, "a.txt", "alpha", 0o644)
	write(t, ws, "src/deep/x.go", "package x", 0o644)
	write(t, ws, "src/empty/.keep", "", 0o644)
	write(t, ws, ".gitignore", "build/\n", 0o644)
	write(t, ws, "build/out.o", "object", 0o644)
	s := newStore(t, Options{})
	t.Cleanup(s.Close)
	if _, err := s.Create(context.Background(), "ses_a", "turn_1", ws); err != nil {
		t.Fatal(err)
	}
	return s, ws
}

// warm takes a warm capture of ws for ses_a, closed at the test's end.
func warm(t *testing.T, s *Store, ws string) *Warm {
	t.Helper()
	wm, err := s.WarmIn(context.Background(), "ses_a", "ses_a", ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wm.Close)
	return wm
}

// TestWarmTakeIsTheWorkspaceAsWalked: a warm capture taken after the last
// turn's changes becomes the next turn's checkpoint without reading a
// file, and what is written right after Take is not in it: a rewind to
// it gives the workspace as it was when the turn started.
func TestWarmTakeIsTheWorkspaceAsWalked(t *testing.T) {
	s, ws := warmWorkspace(t)
	write(t, ws, "a.txt", "alpha, changed by the last turn", 0o644)
	write(t, ws, "src/new.go", "package src", 0o644)
	wm := warm(t, s, ws)
	before := tree(t, ws)
	reads := s.reads.Load()
	p, ok := wm.Take("turn_2")
	if !ok {
		t.Fatal("a warm capture of an unchanged workspace is stale")
	}
	if n := s.reads.Load() - reads; n != 0 {
		t.Fatalf("Take read %d files", n)
	}
	// The agent writes in its first moment, before the commit.
	write(t, ws, "a.txt", "written by the agent at once", 0o644)
	write(t, ws, "src/agent.go", "package src", 0o644)
	c, err := p.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if c.TurnID != "turn_2" || c.Files != 5 {
		t.Fatalf("checkpoint %+v", c.Checkpoint)
	}
	if _, ok := wm.Take("turn_3"); ok {
		t.Fatal("a warm capture was taken twice")
	}
	if _, err := s.Restore(context.Background(), "ses_a", c.ID, ws); err != nil {
		t.Fatal(err)
	}
	if d := diff(before, tree(t, ws)); len(d) > 0 {
		t.Fatalf("the checkpoint is not the workspace the turn started from: %v", d)
	}
}

// TestWarmIsStaleAfterAnyChange: every kind of change to a kept path, at
// any depth, after the warm walk makes Take refuse; the checkpoint taken
// then has the change. A change inside an ignored directory does not.
func TestWarmIsStaleAfterAnyChange(t *testing.T) {
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	changes := map[string]func(ws string) error{
		"same-size write": func(ws string) error { return os.WriteFile(filepath.Join(ws, "a.txt"), []byte("ALPHA"), 0o644) },
		"write with the old mtime put back": func(ws string) error {
			p := filepath.Join(ws, "src/deep/x.go")
			fi, err := os.Stat(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte("package y"), 0o644); err != nil {
				return err
			}
			return os.Chtimes(p, fi.ModTime(), fi.ModTime())
		},
		"chmod":              func(ws string) error { return os.Chmod(filepath.Join(ws, "src/deep/x.go"), 0o600) },
		"touch":              func(ws string) error { return os.Chtimes(filepath.Join(ws, "a.txt"), old, old) },
		"create deep":        func(ws string) error { return os.WriteFile(filepath.Join(ws, "src/deep/y.go"), nil, 0o644) },
		"remove":             func(ws string) error { return os.Remove(filepath.Join(ws, "a.txt")) },
		"rename":             func(ws string) error { return os.Rename(filepath.Join(ws, "a.txt"), filepath.Join(ws, "b.txt")) },
		"mkdir":              func(ws string) error { return os.Mkdir(filepath.Join(ws, "src/deep/sub"), 0o755) },
		"truncate":           func(ws string) error { return os.Truncate(filepath.Join(ws, "a.txt"), 0) },
		"gitignore":          func(ws string) error { return os.WriteFile(filepath.Join(ws, ".gitignore"), nil, 0o644) },
		"remove a directory": func(ws string) error { return os.RemoveAll(filepath.Join(ws, "src/empty")) },
		"hard link in": func(ws string) error {
			return os.Link(filepath.Join(ws, "a.txt"), filepath.Join(ws, "src/a-link"))
		},
		"move a directory out": func(ws string) error {
			return os.Rename(filepath.Join(ws, "src/deep"), filepath.Join(filepath.Dir(ws), filepath.Base(ws)+"-moved"))
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s, ws := warmWorkspace(t)
			wm := warm(t, s, ws)
			must(t, change(ws))
			want := tree(t, ws)
			if _, ok := wm.Take("turn_2"); ok {
				t.Fatal("Take after a change")
			}
			c, err := s.Create(context.Background(), "ses_a", "turn_2", ws)
			if err != nil {
				t.Fatal(err)
			}
			write(t, ws, "a.txt", "later", 0o644)
			if _, err := s.Restore(context.Background(), "ses_a", c.ID, ws); err != nil {
				t.Fatal(err)
			}
			if d := diff(want, tree(t, ws)); len(d) > 0 {
				t.Fatalf("the change is not in the next checkpoint: %v", d)
			}
		})
	}
	t.Run("inside an ignored directory", func(t *testing.T) {
		s, ws := warmWorkspace(t)
		wm := warm(t, s, ws)
		write(t, ws, "build/more.o", "object", 0o644)
		p, ok := wm.Take("turn_2")
		if !ok {
			t.Fatal("a write no checkpoint records made the warm capture stale")
		}
		p.Abort()
	})
}

// TestWarmIsStaleWhenTheStoreMoved: a checkpoint committed meanwhile, a
// sweep (which may have removed its blobs), a file with a second name
// (writes through the other name reach no watch) and a closed store each
// make a warm capture stale.
func TestWarmIsStaleWhenTheStoreMoved(t *testing.T) {
	ctx := context.Background()
	cases := map[string]func(t *testing.T, s *Store, ws string) *Warm{
		"committed meanwhile": func(t *testing.T, s *Store, ws string) *Warm {
			wm := warm(t, s, ws)
			if _, err := s.Create(ctx, "ses_a", "turn_x", ws); err != nil {
				t.Fatal(err)
			}
			return wm
		},
		"swept": func(t *testing.T, s *Store, ws string) *Warm {
			wm := warm(t, s, ws)
			if _, err := s.Sweep(); err != nil {
				t.Fatal(err)
			}
			return wm
		},
		"linked before": func(t *testing.T, s *Store, ws string) *Warm {
			must(t, os.Link(filepath.Join(ws, "a.txt"), filepath.Join(filepath.Dir(ws), filepath.Base(ws)+"-link")))
			return warm(t, s, ws)
		},
		"store closed": func(t *testing.T, s *Store, ws string) *Warm {
			wm := warm(t, s, ws)
			s.Close()
			return wm
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			s, ws := warmWorkspace(t)
			if _, ok := setup(t, s, ws).Take("turn_2"); ok {
				t.Fatal("a stale warm capture was taken")
			}
			// Take released what it took: the session's next capture runs.
			if _, err := s.Create(ctx, "ses_a", "turn_2", ws); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWarmCapturesShareWatches: two sessions warm on one workspace (a
// child shares its parent's): closing one keeps the other's watch.
func TestWarmCapturesShareWatches(t *testing.T) {
	s, ws := warmWorkspace(t)
	other, err := s.WarmIn(context.Background(), "ses_a", "ses_b", ws)
	if err != nil {
		t.Fatal(err)
	}
	wm := warm(t, s, ws)
	other.Close()
	write(t, ws, "src/deep/x.go", "package z", 0o644)
	if _, ok := wm.Take("turn_2"); ok {
		t.Fatal("closing one capture dropped the other's watch")
	}
	wm.Close()
	s.watch.mu.Lock()
	n := len(s.watch.wds)
	s.watch.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d directories still watched after every capture closed", n)
	}
}

// TestWarmCloseLeavesNoTemporaryBlob: a capture never taken removes the
// contents it copied.
func TestWarmCloseLeavesNoTemporaryBlob(t *testing.T) {
	s, ws := warmWorkspace(t)
	write(t, ws, "a.txt", "new content to copy", 0o644)
	wm := warm(t, s, ws)
	temps := func() int {
		ents, err := os.ReadDir(s.blobDir())
		must(t, err)
		n := 0
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				n++
			}
		}
		return n
	}
	if temps() == 0 {
		t.Fatal("the warm capture copied no content")
	}
	wm.Close()
	if n := temps(); n != 0 {
		t.Fatalf("%d temporary blobs left", n)
	}
}

// TestWarmCancelled: a cancelled warm capture returns at once and leaves
// nothing watched.
func TestWarmCancelled(t *testing.T) {
	s, ws := warmWorkspace(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.WarmIn(ctx, "ses_a", "ses_a", ws); err == nil {
		t.Fatal("a cancelled warm capture succeeded")
	}
	if s.watch != nil && len(s.watch.wds) != 0 {
		t.Fatalf("%d directories watched", len(s.watch.wds))
	}
}

// TestWarmStaysWithinItsShareOfWatches: a capture that would watch more
// directories than berth's share of the user's inotify watches is not
// taken ahead, and leaves nothing watched.
func TestWarmStaysWithinItsShareOfWatches(t *testing.T) {
	s, ws := warmWorkspace(t)
	wt, err := s.watcher()
	must(t, err)
	wt.mu.Lock()
	wt.budget = 3
	wt.mu.Unlock()
	if _, err := s.WarmIn(context.Background(), "ses_a", "ses_a", ws); err == nil {
		t.Fatal("a capture of 4 directories was taken within a budget of 3")
	}
	wt.mu.Lock()
	n := len(wt.wds)
	wt.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d directories still watched", n)
	}
	wt.mu.Lock()
	wt.budget = 100
	wt.mu.Unlock()
	warm(t, s, ws)
}
