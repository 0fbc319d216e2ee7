package sqlite

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/berth-sh/berth"
)

// emptyStore is a store with nothing in it, as schema.sql makes it, in WAL
// mode and checkpointed, its migrations recorded with no date. Written by
// `go test ./store/sqlite -run TestTheSchemaIsTheMigrations -update`.
//
// A new store is a copy of it: creating the file, switching it to WAL
// and running the schema cost a first start 10–25 ms of SQL parsing,
// journal writes and syncs, where a copy is one write and one sync.
//
//go:embed empty.db.gz
var emptyStore []byte

// seed makes the store file at path a copy of emptyStore when there is no
// file there, and says whether it did. The copy is written and synced
// under a temporary name and linked into place, so a crash leaves either
// no store or a whole one, and two processes seeding at once end with one
// file (the second link fails and its copy is dropped). Where hard links
// are not supported it makes nothing, and SQLite creates the file.
func seed(path string) (bool, error) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		// A file (or an error the open will report) is there.
		return false, nil
	}
	if _, err := os.Lstat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		// A WAL without its database: SQLite decides what it holds, as
		// it did before there was a copy to make.
		return false, nil
	}
	removeStaleCopies(path)
	zr, err := gzip.NewReader(bytes.NewReader(emptyStore))
	if err != nil {
		return false, berth.WrapError(berth.EInternal, err, "read the built-in empty store")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := path + ".new-" + hex.EncodeToString(rnd[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, berth.WrapError(berth.EInternal, err, "create the store file")
	}
	defer os.Remove(tmp)
	_, err = io.Copy(f, zr)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, berth.WrapError(berth.EInternal, err, "write the store file")
	}
	if err := os.Link(tmp, path); err != nil {
		// Another opener's copy is there, or the file system has no hard
		// links: SQLite then makes the store the slow way (schema.sql).
		return false, nil
	}
	// The new name is durable before anything is written through it.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return false, berth.WrapError(berth.EInternal, err, "sync the store's directory")
		}
	}
	return true, nil
}

// staleCopyAge is how old a copy left under a temporary name must be to
// be taken for one a killed process left (a copy being made is seconds
// old).
const staleCopyAge = time.Minute

// removeStaleCopies removes the copies a process killed while seeding
// path left beside it.
func removeStaleCopies(path string) {
	left, _ := filepath.Glob(path + ".new-*")
	for _, f := range left {
		if fi, err := os.Lstat(f); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleCopyAge {
			_ = os.Remove(f)
		}
	}
}
