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
