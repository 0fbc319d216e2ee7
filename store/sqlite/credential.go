package sqlite

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/store/internal/credtable"
)

// The credentials of a SQLite store are not in its database: berth.db is
// what a user copies, attaches to a bug report or backs up, and it must
// not carry a key. They live in a file of their own beside it
// (CredentialsPath), 0600, owned by the daemon's user, replaced whole on
// every change (docs/api.md, Credentials).

// maxCredentialsFile bounds the credentials file read: far above what a
// user keeps (a few keys of at most berth.MaxCredentialBytes each).
const maxCredentialsFile = 64 << 20

// credentialsVersion is the version of the credentials file's format.
const credentialsVersion = 1

// CredentialsPath is the credentials file of the database at db: in the
// same directory, named after it (berth.db → berth.credentials.json), so
// that no name the database's own files take (berth.db-wal, …) matches it.
func CredentialsPath(db string) string {
	base := filepath.Base(db)
	return filepath.Join(filepath.Dir(db), strings.TrimSuffix(base, filepath.Ext(base))+".credentials.json")
}

// credentialsFile is the content of a credentials file.
type credentialsFile struct {
	Version     int               `json:"version"`
	Credentials []credtable.Entry `json:"credentials"`
}

// credFile is the credtable.Backing of a Store: its credentials file.
type credFile struct {
	path string
}

// Load implements credtable.Backing: no file is no credentials; a file
// that is not a regular file of ours, 0600 or tighter, is refused.
func (f credFile) Load() ([]credtable.Entry, error) {
	// O_NOFOLLOW: a symlink put in place of the file is refused, not read.
	fd, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err,
			"cannot open the credentials file %s (it must be a regular file of the daemon's user, mode 0600)", f.path)
	}
	defer fd.Close()
	if err := checkPrivate(fd, f.path); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(fd, maxCredentialsFile+1))
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot read the credentials file %s", f.path)
	}
	var cf credentialsFile
	if len(raw) > maxCredentialsFile || json.Unmarshal(raw, &cf) != nil || cf.Version != credentialsVersion {
		return nil, berth.Errorf(berth.EUnavailable,
			"the credentials file %s is damaged or of another version: move it away and set the credentials again", f.path)
	}
	return cf.Credentials, nil
}

// checkPrivate refuses an open credentials file that is not a regular file
// owned by this process's user, readable by no one else.
func checkPrivate(fd *os.File, path string) error {
	fi, err := fd.Stat()
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot stat the credentials file %s", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return berth.Errorf(berth.EUnavailable, "the credentials file %s is not a regular file: move it away", path)
	case !ok || int(st.Uid) != os.Geteuid():
		return berth.Errorf(berth.EUnavailable,
			"the credentials file %s is not owned by the daemon's user: move it away, or chown it to this user", path)
	case fi.Mode().Perm()&0o077 != 0:
		return berth.Errorf(berth.EUnavailable,
			"the credentials file %s is readable or writable by others (mode %04o): run chmod 600 %s, and replace the keys it holds if others may have read them",
			path, fi.Mode().Perm(), path)
	}
	return nil
}

// Save implements credtable.Backing: the file is replaced whole, through
// a 0600 temporary file and a rename, and the rename made durable.
func (f credFile) Save(entries []credtable.Entry) error {
	raw, err := json.Marshal(credentialsFile{Version: credentialsVersion, Credentials: entries})
	if err != nil {
		return berth.WrapError(berth.EInternal, err, "encode the credentials")
	}
	if err := atomicfile.WriteFile(f.path, raw); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot write the credentials file %s", f.path)
	}
	if err := atomicfile.SyncDir(filepath.Dir(f.path)); err != nil {
		return berth.WrapError(berth.EUnavailable, err, "cannot write the credentials file %s", f.path)
	}
	return nil
}

// credentials is the credential table, embedded in Store by an unexported
// name so that only its berth.CredentialStore methods show on Store.
type credentials = credtable.Table
