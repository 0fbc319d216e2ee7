package postgres

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

// PutSignIn implements berth.SignInStore.
func (s *Store) PutSignIn(ctx context.Context, in berth.SignIn) error {
	exp, err := codec.SignInExpiry(in)
	if err != nil {
		return err
	}
	err = s.pool.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO signins (id, token, expires_at) VALUES ($1, $2, $3)`, in.ID[:], in.Token[:], exp)
		return err
	})
	switch {
	case isUniqueViolation(err):
		return codec.SignInConflict()
	case err != nil:
		return internal(err, "put sign-in")
	}
	return nil
}

// GetSignIn implements berth.SignInStore.
func (s *Store) GetSignIn(ctx context.Context, id [sha256.Size]byte) (berth.SignIn, error) {
	var token []byte
	var exp int64
	found, err := codec.Found(s.queryRow(ctx, `SELECT token, expires_at FROM signins WHERE id = $1`, []any{id[:]}, &token, &exp),
		"get sign-in")
	return codec.SignInRow(id, found, err, token, exp)
}

// DeleteSignIn implements berth.SignInStore.
func (s *Store) DeleteSignIn(ctx context.Context, id [sha256.Size]byte) error {
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM signins WHERE id = $1`, id[:])
		return err
	})
	if err != nil {
		return internal(err, "delete sign-in")
	}
	return nil
}

// sweepSignInsSQL deletes a bounded batch of expired sign-ins, found in
// expiry order from the index; SKIP LOCKED lets two nodes sweep at once
// without waiting on each other's rows.
const sweepSignInsSQL = `DELETE FROM signins WHERE id IN
    (SELECT id FROM signins WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`

// DeleteExpiredSignIns implements berth.SignInStore.
func (s *Store) DeleteExpiredSignIns(ctx context.Context, now time.Time, limit int) (int, error) {
	at, limit, err := codec.SweepArgs(now, limit)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.pool.with(ctx, func(c *pgx.Conn) error {
		tag, err := c.Exec(ctx, sweepSignInsSQL, at, limit)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, internal(err, "sweep sign-ins")
	}
	return int(n), nil
}
