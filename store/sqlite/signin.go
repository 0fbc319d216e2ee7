package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// PutSignIn implements berth.SignInStore.
func (s *Store) PutSignIn(ctx context.Context, in berth.SignIn) error {
	exp, err := codec.SignInExpiry(in)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO signins (id, token, expires_at) VALUES (?, ?, ?)`, in.ID[:], in.Token[:], exp)
		switch {
		case isConstraint(err):
			return codec.SignInConflict()
		case err != nil:
			return internal(err, "put sign-in")
		}
		return nil
	})
}

// GetSignIn implements berth.SignInStore.
func (s *Store) GetSignIn(ctx context.Context, id [sha256.Size]byte) (berth.SignIn, error) {
	var token []byte
	var exp int64
	err := s.r.QueryRowContext(ctx, `SELECT token, expires_at FROM signins WHERE id = ?`, id[:]).Scan(&token, &exp)
	found, err := codec.Found(err, "get sign-in")
	return codec.SignInRow(id, found, err, token, exp)
}

// DeleteSignIn implements berth.SignInStore.
func (s *Store) DeleteSignIn(ctx context.Context, id [sha256.Size]byte) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM signins WHERE id = ?`, id[:]); err != nil {
			return internal(err, "delete sign-in")
		}
		return nil
	})
}

// DeleteExpiredSignIns implements berth.SignInStore, in expiry order from
// the index.
func (s *Store) DeleteExpiredSignIns(ctx context.Context, now time.Time, limit int) (int, error) {
	at, limit, err := codec.SweepArgs(now, limit)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM signins WHERE id IN
			(SELECT id FROM signins WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)`, at, limit)
		if err != nil {
			return internal(err, "sweep sign-ins")
		}
		if n, err = res.RowsAffected(); err != nil {
			return internal(err, "sweep sign-ins")
		}
		return nil
	})
	return int(n), err
}
