package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// WriteFile and WriteFileUnsynced replace a file whole, mode 0600, and
// leave no temporary file behind, whether they succeed or fail.
func TestWriteFile(t *testing.T) {
	t.Run("synced", func(t *testing.T) { testWriteFile(t, WriteFile) })
	t.Run("unsynced", func(t *testing.T) { testWriteFile(t, WriteFileUnsynced) })
}

// testWriteFile is TestWriteFile for one way of writing.
func testWriteFile(t *testing.T, writeFile func(string, []byte) error) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	for _, data := range []string{"first, longer", "second"} {
		if err := writeFile(name, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(name); err != nil || string(b) != data {
			t.Fatalf("read back %q, %v; want %q", b, err, data)
		}
	}
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode: %v, %v", fi, err)
	}
	// A rename onto a directory fails: the temporary file goes too.
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "d"), []byte("x")); err == nil {
		t.Fatal("wrote over a directory")
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 2 {
		t.Fatalf("the directory holds %v, %v; want f and d only", ents, err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("synced a missing directory")
	}
}

// A Temp leaves the file it replaces as it was until it is placed, and
// Discard removes only a temporary file that was not placed.
func TestTempIsInPlaceOnlyOncePlaced(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmp, err := Create(name, []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(name); string(b) != "old" {
		t.Fatalf("before Place the file holds %q", b)
	}
	if err := tmp.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Place(); err != nil {
		t.Fatal(err)
	}
	tmp.Discard()
	if b, _ := os.ReadFile(name); string(b) != "new" {
		t.Fatalf("after Place the file holds %q", b)
	}
	dropped, err := Create(name, []byte("dropped"))
	if err != nil {
		t.Fatal(err)
	}
	dropped.Discard()
	ents, _ := os.ReadDir(dir)
	if b, _ := os.ReadFile(name); string(b) != "new" || len(ents) != 1 {
		t.Fatalf("after Discard: %q, %d entries", b, len(ents))
	}
}

// PlaceNew makes a file that is not there, and does not replace one that
// is; either way no temporary file stays.
func TestPlaceNew(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	for i, data := range []string{"first", "second"} {
		tmp, err := Create(name, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		err = tmp.PlaceNew()
		tmp.Discard()
		if (err == nil) != (i == 0) {
			t.Fatalf("place %d: %v", i, err)
		}
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != "first" {
		t.Fatalf("read back %q, %v; want the first", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the directory holds %v; want f only", ents)
	}
}

// RemoveStale removes the temporary files older than its age, and nothing
// else.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	for _, n := range []string{TempPrefix + "old", TempPrefix + "new", "old-but-not-temp"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if n != TempPrefix+"new" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	RemoveStale(dir, time.Minute)
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if want := []string{TempPrefix + "new", "old-but-not-temp"}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}

// CreateFrom writes what its reader gives; a reader that fails leaves no
// temporary file behind.
func TestCreateFrom(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	tmp, err := CreateFrom(name, strings.NewReader("streamed"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.Place(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != "streamed" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if _, err := CreateFrom(filepath.Join(dir, "g"), iotest.ErrReader(errors.New("torn"))); err == nil || err.Error() != "torn" {
		t.Fatalf("a failing reader: %v; want its error", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left in the directory: %v; want only f", ents)
	}
}
