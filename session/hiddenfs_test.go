package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// A workspace that contains the daemon's home (berth run --workspace ~):
// the daemon's file service refuses reading the API token and writing
// config.toml (or anything) inside the home, by absolute path, relative
// path, symbolic link or "..", with file_refused and nothing written; the
// rest of the workspace is served as before.
func TestFileServiceRefusesTheDaemonsHome(t *testing.T) {
	e := newEnv(t)
	home := e.home
	ws := filepath.Dir(home)
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("tok-s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(home), filepath.Join(ws, "home-link")); err != nil {
		t.Fatal(err)
	}
	s := e.create(berth.CreateRequest{Workspace: ws, PermissionMode: berth.PermApproveAll})
	base := filepath.Base(home)

	reads := []string{filepath.Join(home, "token"), base + "/token", "home-link/token", "home-link/../" + base + "/token",
		base + "/berth.db", base}
	for _, p := range reads {
		res := e.prompt(s.ID, "read "+p)
		if strings.Contains(res.Text, "tok-s3cret") || strings.Contains(res.Text, "SQLite") || !strings.Contains(res.Text, "outside") {
			t.Errorf("read %s was not refused: %.200q", p, res.Text)
		}
	}
	writes := []string{filepath.Join(home, "config.toml"), base + "/new/config.toml", "home-link/config.toml", base + "/token"}
	for _, p := range writes {
		res := e.prompt(s.ID, "write "+p+" [sandbox]")
		if !strings.Contains(res.Text, "outside") {
			t.Errorf("write %s was not refused: %.200q", p, res.Text)
		}
	}
	for _, p := range []string{"config.toml", "new"} {
		if _, err := os.Lstat(filepath.Join(home, p)); err == nil {
			t.Errorf("%s was written inside the daemon's home", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(home, "token")); string(b) != "tok-s3cret" {
		t.Errorf("token = %q, was overwritten", b)
	}
	if n := len(ofType(e.events(s.ID), berth.EventFileRefused)); n != len(reads)+len(writes) {
		t.Errorf("%d file_refused events, want %d", n, len(reads)+len(writes))
	}

	// Elsewhere in the workspace the file service still works.
	res := e.prompt(s.ID, "write "+s.ID+"-notes/n.txt hello\nread "+s.ID+"-notes/n.txt")
	if !strings.Contains(res.Text, "hello") {
		t.Fatalf("read back = %q", res.Text)
	}
	if b, err := os.ReadFile(filepath.Join(ws, s.ID+"-notes", "n.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("written file = %q, %v", b, err)
	}

	// A snapshot of the workspace leaves the home out, so a workspace
	// restored from it (another session's) holds no copy of the token.
	snap, err := e.m.CreateSnapshot(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := e.m.opts.Snapshots.Restore(context.Background(), snap.ID, dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, base, "token")); err == nil {
		t.Error("the snapshot holds the daemon's token")
	}
	if b, err := os.ReadFile(filepath.Join(dst, s.ID+"-notes", "n.txt")); err != nil || string(b) != "hello" {
		t.Errorf("restored file = %q, %v", b, err)
	}
}

// The home is known by its device and inode, not its name: once the agent
// renamed the directory that holds it, reads and writes under the new name
// are still refused.
func TestFileServiceRefusesTheDaemonsHomeAfterARename(t *testing.T) {
	ws := t.TempDir()
	home := filepath.Join(ws, "a", "bhome")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("tok-s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, home: home}
	e.open()
	t.Cleanup(e.close)
	s := e.create(berth.CreateRequest{Workspace: ws, PermissionMode: berth.PermApproveAll})

	e.prompt(s.ID, "run mv a b")
	// Put the home back where the daemon knows it before the test ends.
	t.Cleanup(func() { _ = os.Rename(filepath.Join(ws, "b"), filepath.Join(ws, "a")) })
	if _, err := os.Stat(filepath.Join(ws, "b", "bhome", "token")); err != nil {
		t.Fatalf("the agent did not rename the home's parent: %v", err)
	}
	res := e.prompt(s.ID, "read b/bhome/token")
	if strings.Contains(res.Text, "tok-s3cret") || !strings.Contains(res.Text, "outside") {
		t.Errorf("read of the renamed home was not refused: %.200q", res.Text)
	}
	res = e.prompt(s.ID, "write b/bhome/config.toml [sandbox]")
	if !strings.Contains(res.Text, "outside") {
		t.Errorf("write into the renamed home was not refused: %.200q", res.Text)
	}
	if _, err := os.Lstat(filepath.Join(ws, "b", "bhome", "config.toml")); err == nil {
		t.Error("config.toml was written inside the renamed home")
	}
	res = e.prompt(s.ID, "write b/other.txt fine\nread b/other.txt")
	if !strings.Contains(res.Text, "fine") {
		t.Errorf("a file beside the home was not served: %q", res.Text)
	}
	e.prompt(s.ID, "run mv b a")
}
