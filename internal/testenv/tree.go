package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FillTree makes dirs directories under dir (d0, d1, …), each holding
// files empty files (0, 1, …): a large workspace for a benchmark.
func FillTree(tb testing.TB, dir string, dirs, files int) {
	tb.Helper()
	for i := range dirs {
		sub := filepath.Join(dir, "d"+strconv.Itoa(i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			tb.Fatal(err)
		}
		for j := range files {
			if err := os.WriteFile(filepath.Join(sub, strconv.Itoa(j)), nil, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// Touch makes an empty file at path (mode 0644), and its directories.
func Touch(tb testing.TB, path string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		tb.Fatal(err)
	}
}
