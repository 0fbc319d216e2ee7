package session

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolvedUnderFollowsTheLinksBelowItsRoot(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	if err := os.MkdirAll(filepath.Join(root, "a", "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ rel, want string }{
		{"a/home", "a/home"},
		{"b/home", "a/home"}, // a link below the root is resolved
		{"c/home", "c/home"}, // missing: as resolvedPath, clean
	} {
		got := resolvedUnder(root, filepath.Dir(c.rel), filepath.Base(c.rel))
		if want := filepath.Join(root, c.want); got != want || got != resolvedPath(filepath.Join(root, c.rel)) {
			t.Errorf("resolvedUnder(%s): %s, want %s", c.rel, got, want)
		}
	}
}

// The daemon's directories are resolved once all exist, and through a
// link in the home's path.
func TestTheDaemonsOwnPathsAreResolvedOnceTheyExist(t *testing.T) {
	real, _ := filepath.EvalSymlinks(t.TempDir())
	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	pl := &placement{m: &Manager{opts: Options{Home: link}}}
	if o := pl.ownPaths(); o.workspaces != filepath.Join(link, "workspaces") || pl.own != nil {
		t.Fatalf("resolved before the directories exist: %+v (kept: %v)", o, pl.own != nil)
	}
	for _, d := range []string{"workspaces", "sessions"} {
		if err := os.Mkdir(filepath.Join(real, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	o := pl.ownPaths()
	if o.workspaces != filepath.Join(real, "workspaces") || o.sessions != filepath.Join(real, "sessions") ||
		len(o.hidden) != 1 || o.hidden[0] != real || pl.own != o {
		t.Fatalf("own paths: %+v (kept: %v)", o, pl.own == o)
	}
}
