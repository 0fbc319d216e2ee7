package codec

import (
	"crypto/sha256"
	"time"

	"github.com/berth-sh/berth"
)

// MaxSignInSweep bounds DeleteExpiredSignIns' limit, so one sweep stays a
// short statement whatever a caller asks.
const MaxSignInSweep = 10000

// SignInExpiry checks a sign-in's expiry and returns it in unix
// nanoseconds. EInvalid for the zero time or one out of range.
func SignInExpiry(s berth.SignIn) (int64, error) {
	n, ok := ToNanos(s.ExpiresAt)
	if !ok {
		return 0, berth.Errorf(berth.EInvalid, "sign-in expiry %s is out of range", s.ExpiresAt.Format(time.RFC3339))
	}
	return n, nil
}

// SweepArgs checks a sweep's arguments and returns now in unix nanoseconds
// and the limit bounded by MaxSignInSweep. EInvalid for a limit below 1 or
// a now out of range.
func SweepArgs(now time.Time, limit int) (int64, int, error) {
	n, ok := ToNanos(now)
	if !ok {
		return 0, 0, berth.Errorf(berth.EInvalid, "sweep time %s is out of range", now.Format(time.RFC3339))
	}
	if limit < 1 {
		return 0, 0, berth.Errorf(berth.EInvalid, "sweep limit %d is below 1", limit)
	}
	return n, min(limit, MaxSignInSweep), nil
}

// SignInConflict is the EConflict of a sign-in id kept already.
func SignInConflict() error {
	return berth.Errorf(berth.EConflict, "a sign-in with this id is kept already")
}

// SignInNotFound is the ENotFound of a sign-in that is not kept.
func SignInNotFound() error {
	return berth.Errorf(berth.ENotFound, "no such sign-in")
}

// SignInRow is the sign-in of id a row gave: found and err are the read's
// (Found's), token and exp its columns. ENotFound when there was no row.
func SignInRow(id [sha256.Size]byte, found bool, err error, token []byte, exp int64) (berth.SignIn, error) {
	switch {
	case err != nil:
		return berth.SignIn{}, err
	case !found:
		return berth.SignIn{}, SignInNotFound()
	}
	out := berth.SignIn{ID: id, ExpiresAt: FromNanos(exp)}
	if copy(out.Token[:], token) != len(out.Token) {
		return berth.SignIn{}, berth.Errorf(berth.EInternal, "a kept sign-in has a token fingerprint of %d bytes", len(token))
	}
	return out, nil
}
