package postgres

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.SessionCounter = (*Store)(nil)

// countSessionsSQL groups the sessions by the columns of a codec.CountRow,
// from the row's own columns (codec.TallyColumns, the usage): no document
// is read. The stopped sessions, the many, by two of them (their stop
// reason and failure); the others by the rest.
const countSessionsSQL = `SELECT 'stopped', agent, stop_reason, failed,
	false, false, false, NULL, NULL, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::float8, COUNT(*)
	FROM sessions WHERE state = 'stopped' AND id <> ALL($1::text[])
	GROUP BY 2, 3, 4
UNION ALL
SELECT state, agent, '', false, waiting, auth_missing, needs_auth, max_cost, max_tokens, ` + codec.SpentColumns + `, COUNT(*)
	FROM sessions WHERE state <> 'stopped' AND id <> ALL($1::text[])
	GROUP BY 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14`

// CountSessions implements berth.SessionCounter: one statement, no
// document read.
func (s *Store) CountSessions(ctx context.Context, exclude []string) ([]berth.SessionCount, error) {
	if exclude == nil {
		exclude = []string{}
	}
	rows, err := collect(ctx, s, "count sessions", countSessionsSQL, []any{exclude}, func(row codec.Row) (codec.CountRow, error) {
		var r codec.CountRow
		return r, row.Scan(r.Targets()...)
	})
	if err != nil {
		return nil, err
	}
	return codec.SessionCounts(rows)
}
