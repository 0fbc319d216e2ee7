package sqlite

import (
	"context"
	"encoding/json"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

var _ berth.SessionCounter = (*Store)(nil)

// countSessionsSQL groups the sessions by the columns of a codec.CountRow,
// reading the fields a badge depends on from each document in SQLite's
// JSON functions instead of decoding it whole: the stopped sessions, the
// many, by two fields (their stop reason and failure); the others by the
// rest, their budgets as the document's JSON text. The one parameter is
// the excluded ids as a JSON array, whatever their number; SQLite keeps
// them in an index of its own for the NOT IN.
const countSessionsSQL = `WITH excluded(id) AS (SELECT value FROM json_each(?1)),
	-- MATERIALIZED: each field read once a row, not once a use below.
	others AS MATERIALIZED (SELECT state, agent,
		COALESCE(json_extract(doc, '$.pending_permissions'), 0) > 0
			OR COALESCE(json_extract(doc, '$.pending_elicitations'), 0) > 0 AS waiting,
		COALESCE(json_extract(doc, '$.auth.missing'), '') <> '' AS auth_missing,
		COALESCE(json_extract(doc, '$.needs_auth'), 0) <> 0 AS needs_auth,
		doc -> '$.max_cost_usd' AS max_cost, doc -> '$.max_tokens' AS max_tokens, ` + codec.UsageColumns + `
		FROM sessions WHERE state <> 'stopped' AND id NOT IN excluded)
SELECT 'stopped', agent, COALESCE(json_extract(doc, '$.stop_reason'), ''),
	json_extract(doc, '$.failure') IS NOT NULL, 0, 0, 0, NULL, NULL, 0, 0, 0, 0, 0.0, COUNT(*)
	FROM sessions WHERE state = 'stopped' AND id NOT IN excluded
	GROUP BY 2, 3, 4
UNION ALL
SELECT state, agent, '', 0, waiting, auth_missing, needs_auth, max_cost, max_tokens, ` + codec.SpentColumns + `, COUNT(*)
	FROM others GROUP BY 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14`

// CountSessions implements berth.SessionCounter: one statement, no
// document decoded.
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
