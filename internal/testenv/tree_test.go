package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FillTree makes the directories and files it says.
func TestFillTree(t *testing.T) {
	dir := t.TempDir()
	FillTree(t, dir, 3, 4)
	for i := range 3 {
		entries, err := os.ReadDir(filepath.Join(dir, "d"+strconv.Itoa(i)))
		if err != nil || len(entries) != 4 {
			t.Fatalf("d%d: %d entries, %v", i, len(entries), err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Fatalf("%d directories", len(entries))
	}
}

// Touch makes the file and the directories above it.
func TestTouch(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b", "f")
	Touch(t, p)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Fatalf("stat %s: %v, %v", p, fi, err)
	}
}

// ShortTempDir's directory is under os.TempDir and gone after the test.
func TestShortTempDir(t *testing.T) {
	var dir string
	t.Run("made", func(t *testing.T) {
		dir = ShortTempDir(t, "bh")
		if filepath.Dir(dir) != filepath.Clean(os.TempDir()) {
			t.Fatalf("%s is not in %s", dir, os.TempDir())
		}
		Touch(t, filepath.Join(dir, "f"))
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s after the test: %v", dir, err)
	}
}
