package sqlite

import (
	_ "embed"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
)

// emptyStore is a store with nothing in it, as schema.sql makes it, in WAL
// mode and checkpointed, its migrations recorded with no date. Written by
// `go test ./store/sqlite -run TestTheSchemaIsTheMigrations -update`.
//
// A new store is a copy of it: creating the file, switching it to WAL
// and running the schema cost a first start 10–25 ms of SQL parsing,
// journal writes and syncs, where a copy is one write and one sync. It is
// kept as it is, not compressed (184 KB, 5 KB gzipped): a new home's start
// inflated it in 1.2 ms, with a decompressor's and a buffer's fresh heap.
//
// A string, so that it lies in the read-only data shared with every
// process of this binary (a []byte would be writable data of each).
//
//go:embed empty.db
var emptyStore string

// seed makes the store file at path a copy of emptyStore when there is no
// file there, and says whether it did. The copy is written and synced
// under a temporary name and linked into place (atomicfile.PlaceNew), so a
// crash leaves either no store or a whole one, and two processes seeding
// at once end with one file. Where hard links are not supported it makes
// nothing, and SQLite creates the file.
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
	dir := filepath.Dir(path)
	atomicfile.RemoveStale(dir, staleTempAge)
	// One write, from the program's read-only data (a strings.Reader
	// writes its string without a copy).
	t, err := atomicfile.CreateFrom(path, strings.NewReader(emptyStore))
	if err != nil {
		return false, berth.WrapError(berth.EInternal, err, "write the store file")
	}
	defer t.Discard()
	if err := t.Sync(); err != nil {
		return false, berth.WrapError(berth.EInternal, err, "write the store file")
	}
	if err := t.PlaceNew(); err != nil {
		// Another opener's copy is there, or the file system has no hard
		// links: SQLite then makes the store the slow way (schema.sql).
		return false, nil
	}
	// The new name is durable before anything is written through it.
	if err := atomicfile.SyncDir(dir); err != nil {
		return false, berth.WrapError(berth.EInternal, err, "sync the store's directory")
	}
	return true, nil
}

// staleTempAge is how old a temporary file beside the store must be to be
// taken for one a killed process left (a write in progress is seconds old).
const staleTempAge = time.Minute
