package wsfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// check (writeFiles is given a workspace whose parent is a link).
func TestWriteFilesNeverFollowsALink(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sub/x", "sub/deeper/x"} {
		if err := writeFile(mustOpenDir(t, ws), p, "x"); err == nil {
			t.Fatalf("%s written through a link", p)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written through the link: %v", entries)
	}
}

// mustOpenDir opens dir as writeFile's root descriptor.
func mustOpenDir(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}
