package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// leaseOfSession selects the lease row of a session by the session's id.
const leaseOfSession = `session_pk = (SELECT pk FROM sessions WHERE id = ?)`

// AcquireLease takes or renews the lease of a session for owner until
// now+ttl. A lease held by another owner that has not expired at now
// (expires_at > now) is EConflict. Taking a lease (the first, one released
// or one expired) gives it a token larger than any this store handed out
// before; renewing one's own, expired or not, keeps the token (see
// migration 0003), unless the owner is a node that came back after it was
// lost (a new incarnation, migration 0024). EInvalid for an empty owner, a ttl that is not positive
// or times out of range; ENotFound if the session is absent.
func (s *Store) AcquireLease(ctx context.Context, sessionID, owner string, now time.Time, ttl time.Duration) (*berth.Lease, error) {
	nowN, expN, err := codec.LeaseTimes(owner, now, ttl)
	if err != nil {
		return nil, err
	}
	l := &berth.Lease{SessionID: sessionID, Owner: owner, ExpiresAt: codec.FromNanos(expN)}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		pk, err := sessionPK(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		var token, expires, heldInc, inc int64
		var holder string
		// The incarnation of owner, 0 when it is no registered node.
		err = tx.QueryRowContext(ctx, `SELECT coalesce((SELECT incarnation FROM nodes WHERE id = ?), 0)`, owner).Scan(&inc)
		if err != nil {
			return internal(err, "read node")
		}
		err = tx.QueryRowContext(ctx, `SELECT token, owner, expires_at, incarnation FROM leases WHERE session_pk = ?`, pk).
			Scan(&token, &holder, &expires, &heldInc)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// Nobody holds it: take it below.
		case err != nil:
			return internal(err, "read lease")
		case holder == owner && heldInc != inc:
			// A new incarnation of the holder: a new token, below.
		case holder == owner:
			// A renewal: the same holder, so the same token.
			if _, err := tx.ExecContext(ctx, `UPDATE leases SET expires_at = ? WHERE token = ?`, expN, token); err != nil {
				return internal(err, "renew lease")
			}
			l.Token = token
			return nil
		case expires > nowN:
			return &berth.Error{Code: berth.EConflict,
				Message: "session " + sessionID + " is leased by another owner",
				Details: map[string]any{"owner": holder, "expires_at": codec.FromNanos(expires)}}
		}
		// A new holder gets a new row, and so a new token: AUTOINCREMENT
		// never hands out a rowid at or below one it gave before.
		if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE session_pk = ?`, pk); err != nil {
			return internal(err, "take lease")
		}
		err = tx.QueryRowContext(ctx, `INSERT INTO leases (session_pk, owner, expires_at, incarnation) VALUES (?, ?, ?, ?) RETURNING token`,
			pk, owner, expN, inc).Scan(&l.Token)
		if err != nil {
			return internal(err, "take lease")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// GetLease returns the lease of a session, expired or not. ENotFound if it
// has none (it was never taken, or was released) or the session is absent.
func (s *Store) GetLease(ctx context.Context, sessionID string) (*berth.Lease, error) {
	l := &berth.Lease{SessionID: sessionID}
	var expires int64
	err := s.r.QueryRowContext(ctx, `SELECT owner, token, expires_at FROM leases WHERE `+leaseOfSession, sessionID).
		Scan(&l.Owner, &l.Token, &expires)
	if err := codec.OneRow(err, "get lease", "session %s has no lease", sessionID); err != nil {
		return nil, err
	}
	l.ExpiresAt = codec.FromNanos(expires)
	return l, nil
}

// ReleaseLease gives up the lease owner holds with token; the next holder
// gets a larger token all the same. A lease that expired but was not taken
// over can still be released by its holder. EConflict if the lease is held
// by another owner or with another token; ENotFound if there is none.
func (s *Store) ReleaseLease(ctx context.Context, sessionID, owner string, token int64) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var holder string
		var held int64
		err := tx.QueryRowContext(ctx, `SELECT owner, token FROM leases WHERE `+leaseOfSession, sessionID).Scan(&holder, &held)
		if err := codec.OneRow(err, "release lease", "session %s has no lease", sessionID); err != nil {
			return err
		}
		if holder != owner || held != token {
			return &berth.Error{Code: berth.EConflict,
				Message: "the lease of session " + sessionID + " is not held with this owner and token",
				Details: map[string]any{"owner": holder, "token": held}}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE token = ?`, held); err != nil {
			return internal(err, "release lease")
		}
		return nil
	})
}
