package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

// acquireLeaseSQL takes, takes over or renews a session's lease in one
// statement, and returns its token. The row is taken when it is free
// (released: an empty owner), already owner's or expired at now ($4); a
// new owner grows the token, the same owner keeps it unless it is a new
// incarnation of a registered node (see migration 0024), whose number the
// row records. It returns no row
// when the session is absent or another owner holds a live lease; either
// way ON CONFLICT has locked the lease row for the rest of the transaction.
const acquireLeaseSQL = `INSERT INTO leases (session_pk, owner, token, expires_at, incarnation)
SELECT pk, $2, 1, $3, COALESCE((SELECT incarnation FROM nodes WHERE id = $2), 0) FROM sessions WHERE id = $1
ON CONFLICT (session_pk) DO UPDATE SET
    owner = excluded.owner,
    token = CASE WHEN leases.owner = excluded.owner AND leases.incarnation = excluded.incarnation
        THEN leases.token ELSE leases.token + 1 END,
    expires_at = excluded.expires_at,
    incarnation = excluded.incarnation
WHERE leases.owner = excluded.owner OR leases.owner = '' OR leases.expires_at <= $4
RETURNING token`

// releaseLeaseSQL gives up a lease in one statement. held locks the live
// lease row (waiting for, then seeing, a concurrent change); the UPDATE
// empties owner, keeping the token so the next one grows from it, only for
// the right owner and token. No row: there is no live lease.
const releaseLeaseSQL = `WITH held AS (
    SELECT session_pk, owner, token FROM leases
    WHERE session_pk = (SELECT pk FROM sessions WHERE id = $1) AND owner <> ''
    FOR UPDATE),
released AS (
    UPDATE leases SET owner = '' FROM held
    WHERE leases.session_pk = held.session_pk AND held.owner = $2 AND held.token = $3
    RETURNING 1)
SELECT held.owner, held.token, EXISTS (SELECT 1 FROM released) FROM held`

// AcquireLease takes or renews the lease of a session for owner until
// now+ttl. A lease another owner holds that has not expired at now is
// EConflict; taking one over (or taking the first) grows Token, renewing
// one's own keeps it (a node that came back after it was lost is a new
// owner). A fenced store remembers the token of a lease its node takes.
// EInvalid for an empty owner, a ttl that is not positive or times out of
// range; ENotFound if the session is absent.
func (s *Store) AcquireLease(ctx context.Context, sessionID, owner string, now time.Time, ttl time.Duration) (*berth.Lease, error) {
	at, until, err := codec.LeaseTimes(owner, now, ttl)
	if err != nil {
		return nil, err
	}
	l := &berth.Lease{SessionID: sessionID, Owner: owner, ExpiresAt: codec.FromNanos(until)}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, acquireLeaseSQL, sessionID, owner, until, at).Scan(&l.Token)
		if isForeignKeyViolation(err) {
			// The session was deleted after the statement found it.
			return berth.Errorf(berth.ENotFound, "session %s not found", sessionID)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			if err != nil {
				return internal(err, "acquire lease")
			}
			return nil
		}
		// Refused: tell a missing session from a lease held by another.
		// The lease row, if any, is locked, so this reads what refused us.
		var holder *string
		var expires *int64
		err = tx.QueryRow(ctx, `SELECT l.owner, l.expires_at FROM sessions s
			LEFT JOIN leases l ON l.session_pk = s.pk WHERE s.id = $1`, sessionID).Scan(&holder, &expires)
		if err := codec.OneRow(err, "acquire lease", "session %s not found", sessionID); err != nil {
			return err
		}
		details := map[string]any{}
		if holder != nil && expires != nil {
			details["owner"], details["expires_at"] = *holder, codec.FromNanos(*expires)
		}
		return &berth.Error{Code: berth.EConflict, Message: "session " + sessionID + " is leased by another node",
			Details: details}
	})
	if err != nil {
		return nil, err
	}
	s.fence.Acquired(sessionID, owner, l.Token)
	return l, nil
}

// GetLease returns the lease of a session, expired or not. ENotFound if it
// has none (never taken, or released).
func (s *Store) GetLease(ctx context.Context, sessionID string) (*berth.Lease, error) {
	l := &berth.Lease{SessionID: sessionID}
	var expires int64
	err := s.queryRow(ctx, `SELECT owner, token, expires_at FROM leases
		WHERE session_pk = (SELECT pk FROM sessions WHERE id = $1) AND owner <> ''`,
		[]any{sessionID}, &l.Owner, &l.Token, &expires)
	if err := codec.OneRow(err, "get lease", "session %s has no lease", sessionID); err != nil {
		return nil, err
	}
	l.ExpiresAt = codec.FromNanos(expires)
	return l, nil
}

// ReleaseLease gives up a lease owner holds with token; the token stays
// stored so that the next one grows from it. EConflict if the lease is
// held by another owner or token is stale; ENotFound if there is no lease.
// A fenced store forgets the token either way: it no longer holds the
// lease.
func (s *Store) ReleaseLease(ctx context.Context, sessionID, owner string, token int64) error {
	err := s.releaseLease(ctx, sessionID, owner, token)
	if c := berth.ErrorCode(err); err == nil || c == berth.EConflict || c == berth.ENotFound {
		s.fence.Released(sessionID, owner)
	}
	return err
}

// releaseLease is ReleaseLease without the fence's bookkeeping.
func (s *Store) releaseLease(ctx context.Context, sessionID, owner string, token int64) error {
	var holder string
	var held int64
	var released bool
	err := s.queryRow(ctx, releaseLeaseSQL, []any{sessionID, owner, token}, &holder, &held, &released)
	if err := codec.OneRow(err, "release lease", "session %s has no lease", sessionID); err != nil {
		return err
	}
	if !released {
		return &berth.Error{Code: berth.EConflict, Message: "the lease of session " + sessionID + " is not held with that token",
			Details: map[string]any{"owner": holder, "token": held}}
	}
	return nil
}
