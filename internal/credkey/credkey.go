// Package credkey reads and makes the key file that seals a PostgreSQL
// store's credentials ([credentials] key_file; docs/api.md, Credentials):
// 32 random bytes, or their hex or base64 (one trailing newline allowed),
// in a regular file of the daemon's user that no one else may read.
package credkey

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/berth-sh/berth"
)

// Size is the key's size: AES-256.
const Size = 32

// Read returns the key in the file at path. EUnavailable, naming the fix,
// for a file that is missing, not a regular file of this user, readable
// or writable by others, or not a key.
func Read(path string) ([]byte, error) {
	// O_NOFOLLOW: the file itself is checked, not what a link points to.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err,
			"cannot open [credentials] key_file %s (make one with: berth credentials keygen %s)", path, path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot stat [credentials] key_file %s", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, berth.Errorf(berth.EUnavailable, "[credentials] key_file %s is not a regular file", path)
	case !ok || int(st.Uid) != os.Geteuid():
		return nil, berth.Errorf(berth.EUnavailable, "[credentials] key_file %s is not owned by the daemon's user: chown it to this user", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, berth.Errorf(berth.EUnavailable,
			"[credentials] key_file %s may be read or written by others (mode %04o): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	raw, err := io.ReadAll(io.LimitReader(f, 4*Size))
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot read [credentials] key_file %s", path)
	}
	if key := parse(raw); key != nil {
		return key, nil
	}
	return nil, berth.Errorf(berth.EUnavailable,
		"[credentials] key_file %s is not a key: want %d random bytes, or their hex or base64 (berth credentials keygen PATH makes one)", path, Size)
}

// parse returns the key raw holds: Size bytes as they are, or their hex or
// base64 text with at most one trailing newline; nil for anything else.
func parse(raw []byte) []byte {
	if len(raw) == Size {
		return raw
	}
	text := bytes.TrimSuffix(raw, []byte("\n"))
	if key, err := hex.DecodeString(string(text)); err == nil && len(key) == Size {
		return key
	}
	if key, err := base64.StdEncoding.DecodeString(string(text)); err == nil && len(key) == Size {
		return key
	}
	return nil
}

// Generate writes a new random key to path, created 0600; an existing file
// is never replaced (EConflict): the credentials sealed under it would be
// lost.
func Generate(path string) error {
	key := make([]byte, Size)
	if _, err := rand.Read(key); err != nil {
		return berth.WrapError(berth.EInternal, err, "generate a key")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, os.ErrExist) {
		return berth.Errorf(berth.EConflict, "%s exists: a new key would leave the credentials sealed under it unreadable", path)
	}
	if err != nil {
		return berth.WrapError(berth.EInvalid, err, "cannot create %s", path)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return berth.WrapError(berth.EInternal, err, "write %s", path)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return berth.WrapError(berth.EInternal, err, "write %s", path)
	}
	return f.Close()
}
