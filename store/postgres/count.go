package postgres

import (
	"context"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.SessionCounter = (*Store)(nil)

// countSessionsSQL groups the sessions by the columns of a codec.CountRow,
// reading the fields a badge depends on from each document in
// PostgreSQL's JSON operators instead of sending it whole: the stopped
// sessions, the many, by two fields (their stop reason and failure); the
// others by the rest, their budgets as the document's JSON text. The
// document is parsed once a row (jsonb, MATERIALIZED).
const countSessionsSQL = `WITH docs AS MATERIALIZED (SELECT state, agent, doc::jsonb AS d, ` + codec.UsageColumns + `
		FROM sessions WHERE id <> ALL($1::text[])),
	others AS (SELECT state, agent,
		COALESCE((d->>'pending_permissions')::bigint, 0) > 0
			OR COALESCE((d->>'pending_elicitations')::bigint, 0) > 0 AS waiting,
		COALESCE(d->'auth'->>'missing', '') <> '' AS auth_missing,
		COALESCE((d->>'needs_auth')::boolean, false) AS needs_auth,
		(d->'max_cost_usd')::text AS max_cost, (d->'max_tokens')::text AS max_tokens, ` + codec.UsageColumns + `
		FROM docs WHERE state <> 'stopped')
SELECT 'stopped', agent, COALESCE(d->>'stop_reason', ''), d->>'failure' IS NOT NULL,
	false, false, false, NULL, NULL, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::float8, COUNT(*)
	FROM docs WHERE state = 'stopped'
	GROUP BY 2, 3, 4
UNION ALL
SELECT state, agent, '', false, waiting, auth_missing, needs_auth, max_cost, max_tokens, ` + codec.SpentColumns + `, COUNT(*)
	FROM others GROUP BY 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14`

// CountSessions implements berth.SessionCounter: one statement, no
// document sent.
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
