package postgres

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
)

// addOwnUsageSQL adds a delta ($1…$6) to a session's own usage and its
// tree's; addTreeUsageSQL to an ancestor's tree usage alone. Each row is
// locked by its UPDATE until the transaction ends, so that concurrent
// calls add up; both answer the row as it is then.
const (
	addOwnUsageSQL = `UPDATE sessions SET usage_calls = usage_calls + $1, usage_input = usage_input + $2,
		usage_output = usage_output + $3, usage_cache_read = usage_cache_read + $4,
		usage_cache_write = usage_cache_write + $5, usage_cost = usage_cost + $6,
		` + addTreeSet + ` WHERE id = $7 RETURNING doc, ` + codec.UsageColumns
	addTreeUsageSQL = `UPDATE sessions SET ` + addTreeSet + ` WHERE id = $7 RETURNING doc, ` + codec.UsageColumns
	addTreeSet      = `tree_calls = tree_calls + $1, tree_input = tree_input + $2, tree_output = tree_output + $3,
		tree_cache_read = tree_cache_read + $4, tree_cache_write = tree_cache_write + $5, tree_cost = tree_cost + $6`
)

// AddUsage implements berth.UsageStore: the session's own and tree usage,
// then each ancestor's tree usage, in one transaction. The rows are
// locked from the session up, the order every AddUsage takes them in, so
// that two never deadlock.
func (s *Store) AddUsage(ctx context.Context, id string, delta berth.Usage) ([]berth.SessionUsage, error) {
	if err := codec.CheckUsage(delta); err != nil {
		return nil, err
	}
	d := codec.UsageArgs(delta)
	var out []berth.SessionUsage
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = codec.WalkUsage(id, func(cur string, own bool, dest ...any) error {
			q := addTreeUsageSQL
			if own {
				q = addOwnUsageSQL
			}
			return tx.QueryRow(ctx, q, append(d, cur)...).Scan(dest...)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
