package daemon

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/client"
)

// tokenName is the file in the home that keeps the generated TCP token.
const tokenName = client.TokenFile

// tokenBytes is the generated token's entropy: 256 bits.
const tokenBytes = 32

// readTokenFile returns the token kept in home, or "" when there is none.
func readTokenFile(home string) string { return client.ReadToken(home) }

// ensureToken returns the token kept in $home/token, generating it first
// when there is none: 32 bytes from crypto/rand, written to a private
// temporary file, synced, and linked into place, so the file is whole, mode
// 0600 from its first byte, and never replaced once it exists (two daemons
// starting at once end up with the same token). A token file that others
// could read is made 0600 again.
func ensureToken(home string) (string, error) {
	path := filepath.Join(home, tokenName)
	if fi, err := os.Lstat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return "", berth.Errorf(berth.EInvalid, "$BERTH_HOME/token is not a regular file")
		}
		if fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", berth.WrapError(berth.EInternal, err, "cannot make $BERTH_HOME/token private")
			}
		}
		if tok := readTokenFile(home); tok != "" {
			return tok, nil
		}
		return "", berth.Errorf(berth.EInvalid, "$BERTH_HOME/token is empty: remove it to have a new token made")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", berth.WrapError(berth.EInternal, err, "cannot read $BERTH_HOME/token")
	}
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", berth.WrapError(berth.EInternal, err, "cannot make a token")
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	// os.CreateTemp makes the file 0600.
	tmp, err := os.CreateTemp(home, ".token-")
	if err != nil {
		return "", berth.WrapError(berth.EInternal, err, "cannot write $BERTH_HOME/token")
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(tok + "\n")
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return "", berth.WrapError(berth.EInternal, err, "cannot write $BERTH_HOME/token")
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another daemon made it first: use that one.
			if tok := readTokenFile(home); tok != "" {
				return tok, nil
			}
		}
		return "", berth.WrapError(berth.EInternal, err, "cannot write $BERTH_HOME/token")
	}
	syncDir(home)
	return tok, nil
}

// syncDir makes a directory entry just created durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
