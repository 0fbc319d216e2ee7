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
