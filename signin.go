package berth

import (
	"context"
	"crypto/sha256"
	"time"
)

// SignIn is a browser sign-in as a store keeps it (docs/api.md, Sign-in and
// browser safety): hashes only, so that nothing read from the store signs
// a browser in or gives the token away.
type SignIn struct {
	// ID is the SHA-256 of the random id the browser's cookie holds.
	ID [sha256.Size]byte
	// Token is a fingerprint of the token the sign-in was made with: a
	// sign-in whose fingerprint is not the token in force is over.
	Token [sha256.Size]byte
	// ExpiresAt is when the sign-in ends.
	ExpiresAt time.Time
}

// SignInStore keeps the browser sign-ins where every node of the store can
// check them, so that a sign-in outlives a daemon restart and works on
// every node of a cluster (docs/api.md, Sign-in and browser safety). Every
// Store implements it.
type SignInStore interface {
	// PutSignIn keeps a new sign-in. EConflict if its ID is kept already;
	// EInvalid for an expiry a store cannot hold (the zero time, or past
	// the year 2262).
	PutSignIn(ctx context.Context, s SignIn) error
	// GetSignIn returns the sign-in of id, expired or not: the caller
	// judges it. ENotFound when there is none.
	GetSignIn(ctx context.Context, id [sha256.Size]byte) (SignIn, error)
	// DeleteSignIn ends the sign-in of id; one that is not kept is not an
	// error.
	DeleteSignIn(ctx context.Context, id [sha256.Size]byte) error
	// DeleteExpiredSignIns removes at most limit sign-ins that expired at
	// or before now and returns how many it removed: a sweep of bounded
	// work.
	DeleteExpiredSignIns(ctx context.Context, now time.Time, limit int) (int, error)
}
