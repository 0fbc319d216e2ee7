package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// shimKeyFile holds the secret the tokens of this home's shims are made
// from, in the home (no sandbox sees it).
const shimKeyFile = "shim-key"

// loadShimKey reads the home's shim key, making it the first time (32
// random bytes, mode 0600).
func loadShimKey(home string) ([]byte, error) {
	path := filepath.Join(home, shimKeyFile)
	key, err := os.ReadFile(path)
	if err == nil && len(key) == 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// Written whole or not at all: a short key is made again.
	tmp := path + "-new"
	if err := os.WriteFile(tmp, key, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return nil, err
	}
	return key, nil
}

// shimToken is the token that signs the reports of session id's shim on
// socket (see shim.Report): 128 bits no agent can know, the same for a
// daemon that restarts (made from the home's shim key), another for each
// shim.
func (m *Manager) shimToken(id, socket string) string {
	if len(m.shimKey) == 0 || socket == "" {
		return ""
	}
	mac := hmac.New(sha256.New, m.shimKey)
	mac.Write([]byte(id + "\x00" + socket))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}
