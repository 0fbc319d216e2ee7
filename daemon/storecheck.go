package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth"
)

// sqliteMagic opens every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// checkSQLiteFile looks at a SQLite store's file before anything opens it,
// so that a damaged or lost store stops start-up with its cause named and
// nothing changed:
//   - a file that is not a SQLite database, or shorter than its header says
//     (truncated) with no WAL to recover the rest from, is refused;
//   - a missing or empty file while the home still has session directories
//     means the sessions' store was lost: refused unless acceptEmpty, since
//     a new store would orphan every one of them.
func checkSQLiteFile(path, home string, acceptEmpty bool) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return checkNoOrphans(path, home, acceptEmpty, "missing")
	}
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot read the store %s: %v", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot read the store %s: %v", path, err)
	}
	if fi.Size() == 0 {
		return checkNoOrphans(path, home, acceptEmpty, "empty")
	}
	var hdr [100]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return berth.Errorf(berth.EUnavailable, "the store %s is damaged: %d bytes, shorter than a SQLite header; restore it from a backup or move it away", path, fi.Size())
	}
	if string(hdr[:16]) != sqliteMagic {
		return berth.Errorf(berth.EUnavailable, "the store %s is not a SQLite database (its header is wrong); restore it from a backup or move it away", path)
	}
	// The page size is at offset 16 (1 means 65536); the page count at 28
	// is valid when the change counter at 24 equals the one at 92.
	pageSize := int64(binary.BigEndian.Uint16(hdr[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	pages := int64(binary.BigEndian.Uint32(hdr[28:32]))
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return berth.Errorf(berth.EUnavailable, "the store %s is damaged: bad page size %d; restore it from a backup or move it away", path, pageSize)
	}
	valid := binary.BigEndian.Uint32(hdr[24:28]) == binary.BigEndian.Uint32(hdr[92:96])
	// A checkpoint killed half-way leaves a header ahead of the file while
	// the WAL still holds the pages: SQLite recovers from it. Only a file
	// with no WAL to recover from is judged by its length.
	if wal, err := os.Stat(path + "-wal"); err == nil && wal.Size() > 0 {
		valid = false
	}
	if valid && pages > 0 && fi.Size() < pages*pageSize {
		return berth.Errorf(berth.EUnavailable, "the store %s is truncated: %d bytes, its header says %d pages of %d; restore it from a backup or move it away",
			path, fi.Size(), pages, pageSize)
	}
	return nil
}

// checkNoOrphans refuses a new store while the home holds the directories
// of sessions a lost store knew, unless acceptEmpty.
func checkNoOrphans(path, home string, acceptEmpty bool, state string) error {
	if acceptEmpty {
		return nil
	}
	ents, err := os.ReadDir(filepath.Join(home, "sessions"))
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "ses_") {
			ids = append(ids, e.Name())
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return &berth.Error{Code: berth.EUnavailable,
		Message: fmt.Sprintf("the store %s is %s but this home has %d session directories (%s…): their store was lost. "+
			"Restore it from a backup, or start with --accept-empty-store to begin a new store and leave them orphaned", path, state, len(ids), ids[0]),
		Details: map[string]any{"sessions": len(ids)}}
}

// CheckSQLiteStore checks the SQLite store a store URL ("" or
// "sqlite:PATH") names in home as a starting daemon would, without opening
// it, and returns its file: `berth doctor` uses it.
func CheckSQLiteStore(home, url string) (string, error) {
	path, err := sqlitePath(home, url)
	if err != nil {
		return "", err
	}
	return path, checkSQLiteFile(path, home, false)
}

// UserHome is the daemon user's home directory, where agents' home_files
// (credentials) are read from; "" when there is none.
func UserHome() string { return userHome() }
