package http

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"time"

	"github.com/berth-sh/berth"
)

// Where sign-ins are kept (docs/api.md, Sign-in and browser safety).
const (
	// signInRecheck is how long a sign-in the store vouched for is then
	// trusted from memory: a logout or a token change on another node
	// ends it here within that time.
	signInRecheck = 10 * time.Second
	// signInSweep is how many expired sign-ins each new sign-in removes
	// from the store: more than it adds, so they cannot pile up, without
	// a timer.
	signInSweep = 16
	// tokenPrintLabel is what the token's fingerprint is the HMAC of.
	tokenPrintLabel = "berth sign-in token fingerprint v1"
	// signInIDBytes is the random id's size: 256 bits.
	signInIDBytes = 32
)

// tokenPrint is the fingerprint of token a kept sign-in carries: an
// HMAC-SHA256 keyed with the token, which tells whether a sign-in was made
// with the token in force without keeping anything that gives it away.
func tokenPrint(token string) [sha256.Size]byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(tokenPrintLabel))
	return [sha256.Size]byte(m.Sum(nil))
}

// signInBook is the browser sign-ins: in the store when the server has one,
// so that they outlive a restart and every node of a cluster checks them,
// with a bounded cache in memory in front of it. Without a store the
// memory is the whole book, and a restart ends every sign-in.
type signInBook struct {
	store berth.SignInStore
	// print is tokenPrint of the token in force.
	print [sha256.Size]byte
	// cache holds the hashed ids known live, each until its expiry or,
	// with a store, signInRecheck after the store said so, whichever is
	// first. Its clock is the book's.
	cache *expiring
	log   *slog.Logger
}

// newSignInBook returns the book of sign-ins made with token, kept in store
// (nil: in memory only).
func newSignInBook(store berth.SignInStore, token string, log *slog.Logger) *signInBook {
	return &signInBook{store: store, print: tokenPrint(token), cache: newExpiring(time.Now), log: log}
}

// add makes a new sign-in valid for ttl and returns its id, the cookie's
// value, with its expiry. It is kept in the store before the id is given
// out, so no browser holds a sign-in a restart would lose; EUnavailable
// when the store does not take it.
func (b *signInBook) add(ctx context.Context, ttl time.Duration) (string, time.Time, error) {
	secret := randomSecret(signInIDBytes)
	now := b.cache.now()
	exp := now.Add(ttl)
	if b.store != nil {
		if err := b.store.PutSignIn(ctx, berth.SignIn{ID: keyOf(secret), Token: b.print, ExpiresAt: exp}); err != nil {
			return "", time.Time{}, storeDown(err)
		}
		if _, err := b.store.DeleteExpiredSignIns(ctx, now, signInSweep); err != nil {
			// The sign-in is made; the next one sweeps again.
			b.log.Warn("sweep expired sign-ins", "err", err)
		}
	}
	b.cache.put(keyOf(secret), b.cacheUntil(now, exp))
	return secret, exp, nil
}

// check reports whether secret is a live sign-in made with the token in
// force: from memory, else from the store, which an expired sign-in or
// one made with another token is then removed from. EUnavailable when the
// store cannot answer: the caller refuses (it never lets a sign-in in
// that it could not check).
func (b *signInBook) check(ctx context.Context, secret string) (bool, error) {
	if !wellFormed(secret) {
		return false, nil
	}
	if b.cache.valid(secret) {
		return true, nil
	}
	if b.store == nil {
		return false, nil
	}
	id := keyOf(secret)
	in, err := b.store.GetSignIn(ctx, id)
	switch {
	case berth.IsCode(err, berth.ENotFound):
		return false, nil
	case err != nil:
		return false, storeDown(err)
	}
	now := b.cache.now()
	if !now.Before(in.ExpiresAt) || subtle.ConstantTimeCompare(in.Token[:], b.print[:]) != 1 {
		// Over for good: expired, or the token it was made with changed.
		if err := b.store.DeleteSignIn(ctx, id); err != nil {
			b.log.Warn("remove an ended sign-in", "err", err)
		}
		return false, nil
	}
	b.cache.put(id, b.cacheUntil(now, in.ExpiresAt))
	return true, nil
}

// end ends the sign-in of secret, in memory and in the store.
// EUnavailable when the store cannot remove it.
func (b *signInBook) end(ctx context.Context, secret string) error {
	if !wellFormed(secret) {
		return nil
	}
	b.cache.remove(secret)
	if b.store == nil {
		return nil
	}
	// POST /v1/logout is public: a made-up id costs a read, never a write.
	id := keyOf(secret)
	_, err := b.store.GetSignIn(ctx, id)
	switch {
	case berth.IsCode(err, berth.ENotFound):
		return nil
	case err != nil:
		return storeDown(err)
	}
	if err := b.store.DeleteSignIn(ctx, id); err != nil {
		return storeDown(err)
	}
	return nil
}

// cacheUntil is how long a sign-in that expires at exp is trusted from
// memory from now on.
func (b *signInBook) cacheUntil(now, exp time.Time) time.Time {
	if b.store == nil {
		return exp
	}
	if until := now.Add(signInRecheck); until.Before(exp) {
		return until
	}
	return exp
}

// wellFormed reports whether secret can be a sign-in id at all, so that
// garbage never costs a store read.
func wellFormed(secret string) bool {
	b, err := base64.RawURLEncoding.DecodeString(secret)
	return err == nil && len(b) == signInIDBytes
}

// storeDown is the error of a sign-in the store could not keep, check or
// end.
func storeDown(err error) error {
	return berth.WrapError(berth.EUnavailable, err,
		"browser sign-ins cannot be checked now: the store does not answer (try again, or use the token)")
}
