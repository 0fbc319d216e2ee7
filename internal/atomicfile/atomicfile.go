// Package atomicfile writes files whole or not at all: through a synced
// temporary file in the same directory and a rename, so that a crash
// leaves the old file or the new one, never a torn one.
package atomicfile

import (
	"os"
	"path/filepath"
)

// TempPrefix begins the names of the temporary files WriteFile makes;
// a directory's cleanup may remove those a crash left.
const TempPrefix = ".tmp-"

// WriteFile writes data to name through a synced temporary file in the
// same directory (mode 0600) and a rename. The caller syncs the directory
// (SyncDir) when the rename must be durable.
func WriteFile(name string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(name), TempPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
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
