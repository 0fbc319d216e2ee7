package http

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// Sign-in constants (docs/api.md, Sign-in and browser safety).
const (
	// CookieName is the browser sign-in cookie.
	CookieName = "berth_session"
	// DefaultSessionTTL is how long a sign-in lasts unless
	// ServerOptions.SessionTTL says otherwise.
	DefaultSessionTTL = 12 * time.Hour
	// CodeTTL is how long a one-time sign-in code stays valid.
	CodeTTL = 2 * time.Minute
	// maxFailures wrong tokens or codes from one address within
	// failureWindow block it for blockFor.
	maxFailures   = 5
	failureWindow = time.Minute
	blockFor      = time.Minute
	// maxSignins bounds the sign-ins and codes kept; only holders of the
	// token can make them, so this is a guard against a runaway script.
	maxSignins = 10000
)

// randomSecret returns n random bytes, base64url-encoded.
func randomSecret(n int) string {
	b := make([]byte, n)
	// crypto/rand.Read never fails on Linux (it panics if it cannot read).
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// secretKey is how a secret is kept in memory: its SHA-256, so the maps hold
// nothing a heap dump could replay, and lookups compare fixed-size keys.
type secretKey [sha256.Size]byte

// keyOf hashes a secret.
func keyOf(secret string) secretKey { return sha256.Sum256([]byte(secret)) }

// expiring is a set of secrets, each valid until its deadline: the one-time
// codes, and the browser sign-ins known live (signInBook's cache).
type expiring struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[secretKey]time.Time
}

// newExpiring returns an empty set.
func newExpiring(now func() time.Time) *expiring {
	return &expiring{now: now, m: make(map[secretKey]time.Time)}
}

// add makes a new random secret valid for ttl and returns it with its expiry.
func (e *expiring) add(ttl time.Duration) (string, time.Time) {
	secret := randomSecret(32)
	exp := e.now().Add(ttl)
	e.put(keyOf(secret), exp)
	return secret, exp
}

// put makes the secret whose key is k valid until exp. A full set first
// drops the expired entries, then, still full, the one that ends first.
func (e *expiring) put(k secretKey, exp time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.m[k]; !ok && len(e.m) >= maxSignins {
		e.pruneLocked(e.now())
	}
	if _, ok := e.m[k]; !ok && len(e.m) >= maxSignins {
		var first secretKey
		var at time.Time
		for key, t := range e.m {
			if at.IsZero() || t.Before(at) {
				first, at = key, t
			}
		}
		delete(e.m, first)
	}
	e.m[k] = exp
}

// valid reports whether secret is in the set and not expired.
func (e *expiring) valid(secret string) bool {
	if secret == "" {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.m[keyOf(secret)]
	if ok && !e.now().Before(exp) {
		delete(e.m, keyOf(secret))
		return false
	}
	return ok
}

// take removes secret and reports whether it was valid: a one-time use.
func (e *expiring) take(secret string) bool {
	if secret == "" {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k := keyOf(secret)
	exp, ok := e.m[k]
	delete(e.m, k)
	return ok && e.now().Before(exp)
}

// remove ends secret.
func (e *expiring) remove(secret string) {
	e.mu.Lock()
	delete(e.m, keyOf(secret))
	e.mu.Unlock()
}

// pruneLocked drops the expired entries.
func (e *expiring) pruneLocked(now time.Time) {
	for k, exp := range e.m {
		if !now.Before(exp) {
			delete(e.m, k)
		}
	}
}

// failures counts wrong tokens and codes per client address and blocks an
// address that made maxFailures of them within failureWindow.
type failures struct {
	mu  sync.Mutex
	now func() time.Time
	m   map[string]*failureRecord
}

// failureRecord is one address's recent failures.
type failureRecord struct {
	times        []time.Time
	blockedUntil time.Time
}

// newFailures returns an empty counter.
func newFailures(now func() time.Time) *failures {
	return &failures{now: now, m: make(map[string]*failureRecord)}
}

// blocked reports whether addr is blocked now.
func (f *failures) blocked(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.m[addr]
	return rec != nil && f.now().Before(rec.blockedUntil)
}

// fail records a failure of addr and reports whether addr is now blocked.
func (f *failures) fail(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if len(f.m) >= maxSignins {
		for a, rec := range f.m {
			if !now.Before(rec.blockedUntil) && (len(rec.times) == 0 || now.Sub(rec.times[len(rec.times)-1]) >= failureWindow) {
				delete(f.m, a)
			}
		}
	}
	rec := f.m[addr]
	if rec == nil {
		rec = &failureRecord{}
		f.m[addr] = rec
	}
	// Keep only the failures inside the window.
	kept := rec.times[:0]
	for _, t := range rec.times {
		if now.Sub(t) < failureWindow {
			kept = append(kept, t)
		}
	}
	rec.times = append(kept, now)
	if len(rec.times) >= maxFailures {
		rec.blockedUntil = now.Add(blockFor)
		rec.times = rec.times[:0]
	}
	return now.Before(rec.blockedUntil)
}
