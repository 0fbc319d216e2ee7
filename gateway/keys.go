package gateway

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
)

// A session key is keyPrefix, then 12 characters that find it (a random
// handle, not secret) and 32 that prove it (24 random bytes, compared in
// constant time), in unpadded base64url.
const (
	keyPrefix    = "berth-gw-"
	handleChars  = 12
	secretChars  = 32
	sessionKeyLn = len(keyPrefix) + handleChars + secretChars
)

// keyring holds the session keys of the live sessions.
type keyring struct {
	mu        sync.RWMutex
	byHandle  map[string]keyEntry
	bySession map[string]string // session → handle
}

// keyEntry is one session's key.
type keyEntry struct {
	session string
	secret  string
}

// KeyBytes is how many bytes a session key is made of (Key).
const KeyBytes = (handleChars + secretChars) / 4 * 3

// Key is the session key made of b: keyPrefix and b in unpadded
// base64url. A caller that derives b (an HMAC of the session's id) gets
// the same key again after a restart.
func Key(b [KeyBytes]byte) string { return keyPrefix + base64.RawURLEncoding.EncodeToString(b[:]) }

// register gives sessionID a new key, replacing any it had.
func (k *keyring) register(sessionID string) string {
	var b [KeyBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	key := Key(b)
	k.set(sessionID, key)
	return key
}

// set makes key sessionID's, replacing any it had; key is well formed.
func (k *keyring) set(sessionID, key string) {
	handle, secret := key[len(keyPrefix):len(keyPrefix)+handleChars], key[len(keyPrefix)+handleChars:]
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.byHandle == nil {
		k.byHandle, k.bySession = map[string]keyEntry{}, map[string]string{}
	}
	if old, ok := k.bySession[sessionID]; ok {
		delete(k.byHandle, old)
	}
	if e, taken := k.byHandle[handle]; taken && e.session != sessionID {
		// Another session's key shares the handle (1 in 2^72): it keeps it.
		return
	}
	k.byHandle[handle] = keyEntry{session: sessionID, secret: secret}
	k.bySession[sessionID] = handle
}

// unregister ends sessionID's key.
func (k *keyring) unregister(sessionID string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if h, ok := k.bySession[sessionID]; ok {
		delete(k.byHandle, h)
		delete(k.bySession, sessionID)
	}
}

// session returns the session whose key key is.
func (k *keyring) session(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok || len(key) != sessionKeyLn {
		return "", false
	}
	k.mu.RLock()
	e, ok := k.byHandle[rest[:handleChars]]
	k.mu.RUnlock()
	if !ok || subtle.ConstantTimeCompare([]byte(e.secret), []byte(rest[handleChars:])) != 1 {
		return "", false
	}
	return e.session, true
}

// credentialHeaders are the headers a caller may present a key in; the
// gateway removes them all from every call it forwards (and
// Proxy-Authorization, which the proxy drops as a hop-by-hop header).
var credentialHeaders = []string{"X-Api-Key", "Authorization", "X-Goog-Api-Key", "Api-Key"}

// presentedKey is the key a call presents, the way its SDK does:
// x-api-key (Anthropic), Authorization: Bearer (OpenAI, and Anthropic's
// auth token), x-goog-api-key or ?key= (Gemini), api-key (Azure).
func presentedKey(r *http.Request) string {
	for _, h := range credentialHeaders {
		v := strings.TrimSpace(r.Header.Get(h))
		if h == "Authorization" {
			scheme, token, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				continue
			}
			v = strings.TrimSpace(token)
		}
		if v != "" {
			return v
		}
	}
	if strings.Contains(r.URL.RawQuery, "key=") {
		return r.URL.Query().Get("key")
	}
	return ""
}
