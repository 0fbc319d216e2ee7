package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-sh/berth/store/internal/codec"
)

// SetStorageSynced implements berth.SessionStore: storage_seq and
// storage_at move forward only (migration 0028), in one statement, so two
// nodes' writes never move them back.
func (s *Store) SetStorageSynced(ctx context.Context, id string, seq int64, at time.Time) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var cur int64
		err := tx.QueryRow(ctx, `UPDATE sessions SET storage_seq = GREATEST(storage_seq, $2),
			storage_at = CASE WHEN storage_seq < $2 THEN $3 ELSE storage_at END WHERE id = $1 RETURNING storage_seq`,
			id, seq, codec.SortNanos(at)).Scan(&cur)
		return codec.OneRow(err, "set storage synced", "session %s not found", id)
	})
}
