package sqlite

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.SessionCounter = (*Store)(nil)

// CountStopped implements berth.SessionCounter: one grouped query that
// reads two fields of each stopped session's document in SQLite's JSON
// functions instead of decoding it whole.
func (s *Store) CountStopped(ctx context.Context, exclude []string) ([]berth.StoppedCount, error) {
	var q strings.Builder
	args := make([]any, 0, len(exclude))
	q.WriteString(`SELECT agent, COALESCE(json_extract(doc, '$.stop_reason'), ''),
		json_extract(doc, '$.failure') IS NOT NULL, COUNT(*)
		FROM sessions WHERE state = 'stopped'`)
	if len(exclude) > 0 {
		q.WriteString(` AND id NOT IN (SELECT value FROM json_each(?))`)
		// One parameter whatever the number of ids: a JSON array.
		ids, err := json.Marshal(exclude)
		if err != nil {
			return nil, internal(err, "count stopped sessions")
		}
		args = append(args, string(ids))
	}
	q.WriteString(` GROUP BY 1, 2, 3`)
	return collect(ctx, s.r, "count stopped sessions", q.String(), args, func(row codec.Row) (berth.StoppedCount, error) {
		var c berth.StoppedCount
		var reason string
		err := row.Scan(&c.Agent, &reason, &c.HasFailure, &c.Sessions)
		c.StopReason = berth.StopReason(reason)
		return c, err
	})
}
