package sqlite

import (
	"context"
	"encoding/json"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.SessionCounter = (*Store)(nil)

// countSessionsSQL groups the sessions by the columns of a codec.CountRow,
// from the row's own columns (codec.TallyColumns, the usage): no document
// is read. The stopped sessions, the many, by two of them (their stop
// reason and failure); the others by the rest. The one parameter is the
// excluded ids as a JSON array, whatever their number; SQLite keeps them
// in an index of its own for the NOT IN.
const countSessionsSQL = `WITH excluded(id) AS (SELECT value FROM json_each(?1))
SELECT 'stopped', agent, stop_reason, failed, 0, 0, 0, NULL, NULL, 0, 0, 0, 0, 0.0, COUNT(*)
	FROM sessions WHERE state = 'stopped' AND id NOT IN excluded
	GROUP BY 2, 3, 4
UNION ALL
SELECT state, agent, '', 0, waiting, auth_missing, needs_auth, max_cost, max_tokens, ` + codec.SpentColumns + `, COUNT(*)
	FROM sessions WHERE state <> 'stopped' AND id NOT IN excluded
	GROUP BY 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14`

// CountSessions implements berth.SessionCounter: one statement, no
// document read.
func (s *Store) CountSessions(ctx context.Context, exclude []string) ([]berth.SessionCount, error) {
	if exclude == nil {
		exclude = []string{}
	}
	ids, err := json.Marshal(exclude)
	if err != nil {
		return nil, internal(err, "count sessions")
	}
	rows, err := collect(ctx, s.r, "count sessions", countSessionsSQL, []any{string(ids)}, func(row codec.Row) (codec.CountRow, error) {
		var r codec.CountRow
		return r, row.Scan(r.Targets()...)
	})
	if err != nil {
		return nil, err
	}
	return codec.SessionCounts(rows)
}
