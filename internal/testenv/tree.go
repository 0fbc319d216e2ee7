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

// ShortTempDir makes a new directory under os.TempDir, named from prefix,
// removed when the test ends: a short path, unlike t.TempDir's (which has
// the test's name in it), for the Unix sockets below it (their paths are
// limited to 107 bytes) or for a directory other users must reach.
func ShortTempDir(tb testing.TB, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// WriteFile writes content at path with mode, making its parents.
func WriteFile(tb testing.TB, path, content string, mode os.FileMode) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		tb.Fatal(err)
	}
}

// Symlink makes the link at path to target, making path's parents.
func Symlink(tb testing.TB, target, path string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		tb.Fatal(err)
	}
}
