package session

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/berth-sh/berth/internal/testenv"
)

// home_files are private copies in the session's home: the agent may write
// them, the user's originals never change; each start copies the user's
// current files again over the agent's; a link the agent left in its home
// does not lead a copy outside it; links inside the user's directory are
// not followed; what is not a relative path inside the home is ignored.
func TestHomeFilesArePrivateCopies(t *testing.T) {
	user, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
	testenv.WriteFile(t, filepath.Join(user, ".tool/auth.json"), "token-1", 0o600)
	testenv.WriteFile(t, filepath.Join(user, ".cfg/dir/settings.json"), "{}", 0o644)
	testenv.WriteFile(t, filepath.Join(user, "secret"), "not for agents", 0o600)
	testenv.Symlink(t, filepath.Join(user, "secret"), filepath.Join(user, ".cfg/leak"))
	m := New(Options{UserHome: user})
	files := []string{".tool/auth.json", ".cfg/", ".missing", "../escape", "/abs"}
	if err := m.place.copyHomeFiles(files, home); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if got := read(filepath.Join(home, ".tool/auth.json")); got != "token-1" {
		t.Fatalf("copy = %q", got)
	}
	if got := read(filepath.Join(home, ".cfg/dir/settings.json")); got != "{}" {
		t.Fatalf("directory copy = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(home, ".cfg/leak")); !os.IsNotExist(err) {
		t.Errorf("a link inside the user's directory was copied: %v", err)
	}
	// The agent writes its copies and adds its own files.
	testenv.WriteFile(t, filepath.Join(home, ".tool/auth.json"), "agent's", 0o600)
	testenv.WriteFile(t, filepath.Join(home, ".cfg/state.json"), "kept", 0o600)
	if got := read(filepath.Join(user, ".tool/auth.json")); got != "token-1" {
		t.Fatalf("the user's file changed: %q", got)
	}
	// It swaps a directory for a link out of its home, and a file for a
	// link to a file outside.
	if err := os.RemoveAll(filepath.Join(home, ".cfg/dir")); err != nil {
		t.Fatal(err)
	}
	testenv.Symlink(t, outside, filepath.Join(home, ".cfg/dir"))
	victim := filepath.Join(outside, "victim")
	testenv.WriteFile(t, victim, "victim", 0o644)
	if err := os.Remove(filepath.Join(home, ".tool/auth.json")); err != nil {
		t.Fatal(err)
	}
	testenv.Symlink(t, victim, filepath.Join(home, ".tool/auth.json"))

	// The next start: the user's current files again, nothing outside.
	testenv.WriteFile(t, filepath.Join(user, ".tool/auth.json"), "token-2", 0o600)
	_ = m.place.copyHomeFiles(files, home)
	if got := read(filepath.Join(home, ".tool/auth.json")); got != "token-2" {
		t.Errorf("after a restart the copy = %q, want the user's current file", got)
	}
	if got := read(victim); got != "victim" {
		t.Errorf("a copy went through the agent's link: %q", got)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("a copy landed outside the home: %v", ents)
	}
	if got := read(filepath.Join(home, ".cfg/dir/settings.json")); got != "{}" {
		t.Errorf("the directory was not restored in the home: %q", got)
	}
	if got := read(filepath.Join(home, ".cfg/state.json")); got != "kept" {
		t.Errorf("the agent's own file = %q", got)
	}
	for _, p := range []string{filepath.Join(home, "escape"), filepath.Join(home, "abs")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists: %v", p, err)
		}
	}
}

// What the user's side swaps in between the walk's look at a file and its
// copy — the file for a link to a secret, for a FIFO, or its directory for
// a link to another directory holding a file of that name — is not read:
// no secret lands in the session's home and nothing hangs the start.
func TestHomeFilesSwappedDuringTheCopy(t *testing.T) {
	user, outside := t.TempDir(), t.TempDir()
	testenv.WriteFile(t, filepath.Join(outside, "a.json"), "secret", 0o600)
	testenv.WriteFile(t, filepath.Join(outside, "sub/c.json"), "secret", 0o600)
	testenv.WriteFile(t, filepath.Join(user, ".cfg/a.json"), "a", 0o600)
	testenv.WriteFile(t, filepath.Join(user, ".cfg/b.json"), "b", 0o600)
	testenv.WriteFile(t, filepath.Join(user, ".cfg/sub/c.json"), "c", 0o600)
	cfg := filepath.Join(user, ".cfg")
	swap := map[string]func(){
		"a.json": func() {
			noErr(t, os.Remove(filepath.Join(cfg, "a.json")))
			testenv.Symlink(t, filepath.Join(outside, "a.json"), filepath.Join(cfg, "a.json"))
		},
		"b.json": func() {
			noErr(t, os.Remove(filepath.Join(cfg, "b.json")))
			noErr(t, syscall.Mkfifo(filepath.Join(cfg, "b.json"), 0o600))
		},
		"sub/c.json": func() {
			noErr(t, os.RemoveAll(filepath.Join(cfg, "sub")))
			testenv.Symlink(t, filepath.Join(outside, "sub"), filepath.Join(cfg, "sub"))
		},
	}
	home := t.TempDir()
	root, err := os.OpenRoot(home)
	noErr(t, err)
	defer root.Close()
	c := homeCopier{root: root, budget: maxHomeFilesBytes, walked: func(p string) {
		if f := swap[filepath.ToSlash(p)]; f != nil {
			f()
		}
	}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.copyTree(cfg, ".cfg")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the copy hangs on a FIFO swapped in")
	}
	err = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if b, _ := os.ReadFile(p); string(b) == "secret" {
			t.Errorf("a file outside the user's directory was copied to %s", p)
		}
		return nil
	})
	noErr(t, err)
}

// noErr fails the test on an error.
func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A directory's copy leaves a login's token files out (the agent calls
// the model gateway instead); a home_files entry naming one is copied.
func TestHomeFilesLeaveTokensOut(t *testing.T) {
	user, home := t.TempDir(), t.TempDir()
	for _, name := range []string{"oauth_creds.json", "google_accounts.json", "nested/.credentials.json", "nested/auth.json"} {
		testenv.WriteFile(t, filepath.Join(user, ".gemini", name), "token", 0o600)
	}
	testenv.WriteFile(t, filepath.Join(user, ".gemini/settings.json"), "{}", 0o600)
	testenv.WriteFile(t, filepath.Join(user, ".own/oauth_creds.json"), "asked for", 0o600)
	m := New(Options{UserHome: user})
	if err := m.place.copyHomeFiles([]string{".gemini/", ".own/oauth_creds.json"}, home); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".gemini/settings.json")); err != nil {
		t.Errorf("the directory's config was not copied: %v", err)
	}
	for _, name := range []string{"oauth_creds.json", "google_accounts.json", "nested/.credentials.json", "nested/auth.json"} {
		if _, err := os.Stat(filepath.Join(home, ".gemini", name)); !os.IsNotExist(err) {
			t.Errorf(".gemini/%s was copied (%v)", name, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, ".own/oauth_creds.json")); err != nil || string(b) != "asked for" {
		t.Errorf("the file home_files names: %q, %v", b, err)
	}
}
