package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/berth-sh/berth"
)

var _ berth.SessionCounter = (*Store)(nil)

// countStoppedSQL groups the stopped sessions, reading two fields of each
// document in PostgreSQL's JSON operators instead of decoding it whole.
const countStoppedSQL = `SELECT agent, COALESCE(doc::jsonb->>'stop_reason', ''),
	(doc::jsonb->>'failure') IS NOT NULL, COUNT(*)
	FROM sessions WHERE state = 'stopped' AND id <> ALL($1::text[])
	GROUP BY 1, 2, 3`

// CountStopped implements berth.SessionCounter.
func (s *Store) CountStopped(ctx context.Context, exclude []string) ([]berth.StoppedCount, error) {
	if exclude == nil {
		exclude = []string{}
	}
	var out []berth.StoppedCount
	err := s.query(ctx, countStoppedSQL, []any{exclude}, func(rows pgx.Rows) error {
		var c berth.StoppedCount
		var reason string
		var n int64
		if err := rows.Scan(&c.Agent, &reason, &c.HasFailure, &n); err != nil {
			return err
		}
		c.StopReason, c.Sessions = berth.StopReason(reason), int(n)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, internal(err, "count stopped sessions")
	}
	return out, nil
}
