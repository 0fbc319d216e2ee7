package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/berth-sh/berth/store/internal/codec"
)

// SetStorageSynced implements berth.SessionStore: storage_seq and
// storage_at move forward only (migration 0028).
func (s *Store) SetStorageSynced(ctx context.Context, id string, seq int64, at time.Time) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var cur int64
		err := tx.QueryRowContext(ctx, `SELECT storage_seq FROM sessions WHERE id = ?`, id).Scan(&cur)
		if err := codec.OneRow(err, "set storage synced", "session %s not found", id); err != nil {
			return err
		}
		if seq <= cur {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET storage_seq = ?, storage_at = ? WHERE id = ?`, seq, codec.SortNanos(at), id); err != nil {
			return internal(err, "set storage synced")
		}
		return nil
	})
}
