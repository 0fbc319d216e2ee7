package boxutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// ChownTree gives root's entries away but never follows a symbolic link
// out of the tree, never touches a hidden path or a file with another
// link, and leaves other users' files alone.
func TestChownTree(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	const id = 123456
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	mustWrite(t, secret)
	mustWrite(t, filepath.Join(dir, "sub", "f"))
	mustWrite(t, filepath.Join(dir, "hidden", "db"))
	mustWrite(t, filepath.Join(dir, "other"))
	if err := os.Chown(filepath.Join(dir, "other"), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(secret, filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := ChownTree(dir, id, id, true, []string{filepath.Join(dir, "hidden")}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]uint32{
		dir: id, filepath.Join(dir, "sub"): id, filepath.Join(dir, "sub", "f"): id, filepath.Join(dir, "link"): id,
		filepath.Join(dir, "hidden"): 0, filepath.Join(dir, "hidden", "db"): 0,
		filepath.Join(dir, "other"): 4242, secret: 0, outside: 0,
	} {
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != want {
			t.Errorf("%s belongs to %d, want %d", path, st.Uid, want)
		}
	}
}

// mustWrite makes an empty file at path, and its directories.
func mustWrite(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}
