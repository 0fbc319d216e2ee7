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
	d := codec.UsageArgs(delta)
	var out []berth.SessionUsage
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		q, args := tx.StmtContext(ctx, s.addOwnUsage), append(append(append([]any{}, d...), d...), id)
		for cur := id; cur != "" && len(out) < codec.MaxAncestors; {
			var doc []byte
			var u codec.UsageRow
			err := q.QueryRowContext(ctx, args...).Scan(append([]any{&doc}, u.Targets()...)...)
			if found, err := codec.Found(err, "add usage"); err != nil {
				return err
			} else if !found && len(out) == 0 {
				return berth.Errorf(berth.ENotFound, "session %s not found", id)
			} else if !found {
				// An ancestor deleted before its descendant: the walk ends.
				return nil
			}
			sess, err := codec.DecodeSession(doc, 0, 0)
			if err != nil {
				return err
			}
			out = append(out, codec.SessionUsage(sess, u))
			cur = sess.ParentID
			q, args = tx.StmtContext(ctx, s.addTreeUsage), append(append([]any{}, d...), cur)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
