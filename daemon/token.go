package daemon

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/internal/atomicfile"
)

// tokenName is the file in the home that keeps the generated TCP token.
const tokenName = client.TokenFile

// tokenBytes is the generated token's entropy: 256 bits.
const tokenBytes = 32

// readTokenFile returns the token kept in home, or "" when there is none.
func readTokenFile(home string) string { return client.ReadToken(home) }

// ensureToken returns the token kept in $home/token, generating it first
// when there is none: 32 bytes from crypto/rand, written to a private
// temporary file and linked into place, so the file is mode 0600 from its
// first byte and never replaced once it holds a token (two daemons
// starting at once end up with the same token). A token file that others
// could read is made 0600 again.
//
// The write is not synced (a daemon's first start would wait a journal
// commit for it): a crash that loses it leaves no file, or one that is
// empty or all NUL bytes (torn), and a torn token is replaced by a new one
// here. Clients read the file anew each time, and the daemon makes the
// token under the home's lock, so no one else holds the old one.
func ensureToken(home string) (string, error) {
	path := filepath.Join(home, tokenName)
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return newToken(home, path, (*atomicfile.Temp).PlaceNew)
	case err != nil:
		return "", berth.WrapError(berth.EInternal, err, "cannot read $BERTH_HOME/token")
	case !fi.Mode().IsRegular():
		return "", berth.Errorf(berth.EInvalid, "$BERTH_HOME/token is not a regular file")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return "", berth.WrapError(berth.EInternal, err, "cannot make $BERTH_HOME/token private")
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", berth.WrapError(berth.EInternal, err, "cannot read $BERTH_HOME/token")
	}
	if tornToken(raw) {
		return newToken(home, path, (*atomicfile.Temp).Place)
	}
	if tok := strings.TrimSpace(string(raw)); tok != "" {
		return tok, nil
	}
	return "", berth.Errorf(berth.EInvalid, "$BERTH_HOME/token is empty: remove it to have a new token made")
}

// newToken writes a new token to path through a private temporary file
// that place puts there: PlaceNew when there is none (another daemon's,
// made meanwhile, wins), Place over a torn one.
func newToken(home, path string, place func(*atomicfile.Temp) error) (string, error) {
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", berth.WrapError(berth.EInternal, err, "cannot make a token")
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	tmp, err := atomicfile.Create(path, []byte(tok+"\n"))
	if err != nil {
		return "", berth.WrapError(berth.EInternal, err, "cannot write $BERTH_HOME/token")
	}
	defer tmp.Discard()
	if err := place(tmp); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another daemon made it first: use that one.
			if tok := readTokenFile(home); tok != "" {
				return tok, nil
			}
		}
		return "", berth.WrapError(berth.EInternal, err, "cannot write $BERTH_HOME/token")
	}
	return tok, nil
}

// tornToken reports whether a token file holds what a crash leaves of an
// unsynced write: nothing, or NUL bytes where the data never reached the
// disk.
func tornToken(raw []byte) bool {
	return len(bytes.Trim(raw, "\x00")) == 0
}
