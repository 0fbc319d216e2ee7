package sqlite

import (
	"context"
	"database/sql"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// addOwnUsageSQL adds a delta to a session's own usage and its tree's;
// addTreeUsageSQL to an ancestor's tree usage alone. Both answer the row
// as it is then.
const (
	addOwnUsageSQL = `UPDATE sessions SET usage_calls = usage_calls + ?, usage_input = usage_input + ?,
		usage_output = usage_output + ?, usage_cache_read = usage_cache_read + ?,
		usage_cache_write = usage_cache_write + ?, usage_cost = usage_cost + ?,
		` + addTreeSet + ` WHERE id = ? RETURNING doc, ` + codec.UsageColumns
	addTreeUsageSQL = `UPDATE sessions SET ` + addTreeSet + ` WHERE id = ? RETURNING doc, ` + codec.UsageColumns
	addTreeSet      = `tree_calls = tree_calls + ?, tree_input = tree_input + ?, tree_output = tree_output + ?,
		tree_cache_read = tree_cache_read + ?, tree_cache_write = tree_cache_write + ?, tree_cost = tree_cost + ?`
)

// AddUsage implements berth.UsageStore: the session's own and tree usage,
// then each ancestor's tree usage, in one transaction.
func (s *Store) AddUsage(ctx context.Context, id string, delta berth.Usage) ([]berth.SessionUsage, error) {
	if err := codec.CheckUsage(delta); err != nil {
		return nil, err
	}
	if err := s.stmtsReady(ctx); err != nil {
		return nil, internal(err, "add usage")
	}
	d := codec.UsageArgs(delta)
	var out []berth.SessionUsage
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = codec.WalkUsage(id, func(cur string, own bool, dest ...any) error {
			if own {
				// The own row's statement adds the delta to both halves.
				return tx.StmtContext(ctx, s.addOwnUsage).QueryRowContext(ctx, append(append(append([]any{}, d...), d...), cur)...).Scan(dest...)
			}
			return tx.StmtContext(ctx, s.addTreeUsage).QueryRowContext(ctx, append(append([]any{}, d...), cur)...).Scan(dest...)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
