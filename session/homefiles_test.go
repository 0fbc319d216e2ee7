package session

import (
	"os"
	"path/filepath"
	"testing"
)

// home_files are private copies in the session's home: the agent may write
// them, the user's originals never change; each start copies the user's
// current files again over the agent's; a link the agent left in its home
// does not lead a copy outside it; links inside the user's directory are
// not followed; what is not a relative path inside the home is ignored.
func TestHomeFilesArePrivateCopies(t *testing.T) {
	user, home, outside := t.TempDir(), t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(user, ".tool/auth.json"), "token-1", 0o600)
	writeTestFile(t, filepath.Join(user, ".cfg/dir/settings.json"), "{}", 0o644)
	writeTestFile(t, filepath.Join(user, "secret"), "not for agents", 0o600)
	symlink(t, filepath.Join(user, "secret"), filepath.Join(user, ".cfg/leak"))
	m := New(Options{UserHome: user})
	files := []string{".tool/auth.json", ".cfg/", ".missing", "../escape", "/abs"}
	if err := m.copyHomeFiles(files, home); err != nil {
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
	writeTestFile(t, filepath.Join(home, ".tool/auth.json"), "agent's", 0o600)
	writeTestFile(t, filepath.Join(home, ".cfg/state.json"), "kept", 0o600)
	if got := read(filepath.Join(user, ".tool/auth.json")); got != "token-1" {
		t.Fatalf("the user's file changed: %q", got)
	}
	// It swaps a directory for a link out of its home, and a file for a
	// link to a file outside.
	if err := os.RemoveAll(filepath.Join(home, ".cfg/dir")); err != nil {
		t.Fatal(err)
	}
	symlink(t, outside, filepath.Join(home, ".cfg/dir"))
	victim := filepath.Join(outside, "victim")
	writeTestFile(t, victim, "victim", 0o644)
	if err := os.Remove(filepath.Join(home, ".tool/auth.json")); err != nil {
		t.Fatal(err)
	}
	symlink(t, victim, filepath.Join(home, ".tool/auth.json"))

	// The next start: the user's current files again, nothing outside.
	writeTestFile(t, filepath.Join(user, ".tool/auth.json"), "token-2", 0o600)
	_ = m.copyHomeFiles(files, home)
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
