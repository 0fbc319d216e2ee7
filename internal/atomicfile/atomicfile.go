// Package atomicfile writes files whole or not at all: through a synced
// temporary file in the same directory and a rename, so that a crash
// leaves the old file or the new one, never a torn one.
package atomicfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// TempPrefix begins the names of the temporary files WriteFile makes;
// a directory's cleanup may remove those a crash left.
const TempPrefix = ".tmp-"

// WriteFile writes data to name through a synced temporary file in the
// same directory (mode 0600) and a rename. The caller syncs the directory
// (SyncDir) when the rename must be durable.
func WriteFile(name string, data []byte) error {
	t, err := Create(name, data)
	if err != nil {
		return err
	}
	defer t.Discard()
	if err := t.Sync(); err != nil {
		return err
	}
	return t.Place()
}

// WriteFileUnsynced is WriteFile without the sync, for a file whose loss
// costs nothing: a crashed process leaves the old file or the new one,
// while a power loss may leave the new one empty or gone.
func WriteFileUnsynced(name string, data []byte) error {
	t, err := Create(name, data)
	if err != nil {
		return err
	}
	defer t.Discard()
	return t.Place()
}

// Temp is data written under a temporary name beside the file it will
// replace: Sync makes it durable and Place renames it into place, each in
// its own time, so that a caller writing several files syncs them one
// after another and renames them after that (one journal commit rather
// than one per file). Discard removes what was not placed.
type Temp struct {
	f      *os.File
	name   string
	placed bool
}

// Create writes data to a temporary file beside name (mode 0600).
func Create(name string, data []byte) (*Temp, error) {
	return CreateFrom(name, bytes.NewReader(data))
}

// CreateFrom writes what r reads to a temporary file beside name (mode
// 0600), without holding it all in memory.
func CreateFrom(name string, r io.Reader) (*Temp, error) {
	f, err := os.CreateTemp(filepath.Dir(name), TempPrefix+"*")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	return &Temp{f: f, name: name}, nil
}

// Sync makes the temporary file's content durable.
func (t *Temp) Sync() error { return t.f.Sync() }

// syncEach is how many temporary files SyncAll syncs one by one; more
// take one syncfs.
const syncEach = 2

// SyncAll makes the content of every temporary file durable: one by one
// when there are few, else with one syncfs of the file system dir is on
// (which they must be on: one journal commit rather than one a file).
func SyncAll(ts []*Temp, dir string) error {
	if len(ts) <= syncEach {
		for _, t := range ts {
			if err := t.Sync(); err != nil {
				return err
			}
		}
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// Place renames the temporary file to its name; the caller syncs the
// directory (SyncDir) when the rename must be durable.
func (t *Temp) Place() error { return t.place(os.Rename) }

// PlaceNew links the temporary file to its name, which must not exist
// (the link fails then, as on a file system without hard links), and
// removes the temporary name: of two writers racing to make one file, one
// wins and the other's copy is dropped. The caller syncs the directory
// (SyncDir) when the new name must be durable.
func (t *Temp) PlaceNew() error {
	if err := t.place(os.Link); err != nil {
		return err
	}
	_ = os.Remove(t.f.Name())
	return nil
}

// place closes the temporary file and gives it its name by move (a
// rename or a link).
func (t *Temp) place(move func(from, to string) error) error {
	if err := t.f.Close(); err != nil {
		return err
	}
	if err := move(t.f.Name(), t.name); err != nil {
		return err
	}
	t.placed = true
	return nil
}

// Discard removes the temporary file unless it was placed.
func (t *Temp) Discard() {
	if t.placed {
		return
	}
	_ = t.f.Close()
	_ = os.Remove(t.f.Name())
}

// SyncDir fsyncs a directory, making the renames in it durable.
func SyncDir(dir string) error { return Sync(dir) }

// Sync fsyncs the file or directory name.
func Sync(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// RemoveStale removes from dir the temporary files (TempPrefix) older than
// age: those a process killed while writing left (a write in progress is
// younger).
func RemoveStale(dir string, age time.Duration) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), TempPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > age {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
