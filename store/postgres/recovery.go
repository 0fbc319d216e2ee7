package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// rowsOfSessions selects the rows of a side table (queue_entries,
// permissions) of the sessions whose ids are in $1 with state $2.
const rowsOfSessions = `session_pk IN (SELECT pk FROM sessions WHERE id = ANY($1)) AND state = $2`

// sessionOfRow is the id of a side table row's session.
const sessionOfRow = `(SELECT id FROM sessions WHERE pk = session_pk)`

// recoveryOpenTurnsSQL finds each session's last turn_started and keeps it
// when no turn_ended of its turn follows: lookups in events_by_type.
const recoveryOpenTurnsSQL = `SELECT s.id, e.seq, e.turn_id, e.time, e.data FROM sessions s
JOIN LATERAL (SELECT seq, turn_id, time, data FROM events
    WHERE session_pk = s.pk AND type = $2 AND ` + rareTypesTerm + ` ORDER BY seq DESC LIMIT 1) e ON true
WHERE s.id = ANY($1) AND NOT EXISTS (SELECT 1 FROM events
    WHERE session_pk = s.pk AND type = $3 AND ` + rareTypesTerm + ` AND seq > e.seq AND turn_id = e.turn_id)`

// recoverySessionsSQL reads the sessions as GetSession does, each after
// its id.
const recoverySessionsSQL = `SELECT id, ` + codec.SessionColumns +
	` FROM sessions WHERE id = ANY($1)`

// listLiveSQL lists the live sessions from the sessions_live index
// alone (its WHERE, word for word, lets the planner use it).
const listLiveSQL = `SELECT id, state, shim_socket FROM sessions WHERE state <> 'stopped'`

// ListLive implements berth.RecoveryStore in one statement.
func (s *Store) ListLive(ctx context.Context) ([]berth.LiveSession, error) {
	return collect(ctx, s, "list live sessions", listLiveSQL, nil, func(row codec.Row) (berth.LiveSession, error) {
		var l berth.LiveSession
		return l, row.Scan(&l.ID, &l.State, &l.ShimSocket)
	})
}

// ListRecovery reads the session, its open turn, its pending queue
// entries, its pending permissions and its pending elicitations of every
// session named, in one read-only snapshot of five statements. Sessions
// that do not exist are absent from the map.
func (s *Store) ListRecovery(ctx context.Context, sessionIDs []string) (map[string]*berth.Recovery, error) {
	out := make(map[string]*berth.Recovery, len(sessionIDs))
	if len(sessionIDs) == 0 {
		return out, nil
	}
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		each := func(q string, args []any, fn func(pgx.Rows) error) error { return eachRow(ctx, tx, q, args, fn) }
		// Every session that exists has an entry, with the session itself.
		if err := each(recoverySessionsSQL, []any{sessionIDs}, func(rows pgx.Rows) error {
			var id string
			sess, err := codec.ScanSession(func(dest ...any) error { return rows.Scan(append([]any{&id}, dest...)...) }, "")
			if err != nil {
				return err
			}
			out[id] = &berth.Recovery{Session: sess}
			return nil
		}); err != nil {
			return err
		}
		if err := each(`SELECT `+sessionOfRow+`, `+queueCols+`, row_number() OVER (PARTITION BY session_pk, kind ORDER BY ord)
			FROM queue_entries WHERE `+rowsOfSessions+` ORDER BY session_pk, ord`,
			[]any{sessionIDs, berth.EntryPending}, func(rows pgx.Rows) error {
				var id string
				e := &berth.QueueEntry{}
				var created *int64
				var content string
				if err := rows.Scan(&id, &e.ID, &e.Kind, &e.Text, &e.Generation, &e.State, &e.TurnID, &created, &content, &e.Position); err != nil {
					return err
				}
				var err error
				if e.Content, err = codec.DecodeContent(content); err != nil {
					return err
				}
				e.SessionID, e.CreatedAt = id, codec.FromNullNanos(created)
				if r := out[id]; r != nil {
					r.Queue = append(r.Queue, e)
				}
				return nil
			}); err != nil {
			return err
		}
		if err := each(`SELECT `+sessionOfRow+`, `+permissionCols+` FROM permissions WHERE `+rowsOfSessions+` ORDER BY session_pk, ord`,
			[]any{sessionIDs, berth.PermissionPending}, func(rows pgx.Rows) error {
				var id string
				// The session's id comes first, then scanPermission's columns.
				p, err := scanPermission(prefixed{rows, &id}, "")
				if err != nil {
					return err
				}
				p.SessionID = id
				if r := out[id]; r != nil {
					r.Pending = append(r.Pending, p)
				}
				return nil
			}); err != nil {
			return err
		}
		if err := each(`SELECT `+sessionOfRow+`, doc FROM elicitations WHERE `+rowsOfSessions+` ORDER BY session_pk, ord`,
			[]any{sessionIDs, berth.ElicitationPending}, func(rows pgx.Rows) error {
				id, e, err := codec.ScanSessionElicitation(rows)
				if err != nil {
					return err
				}
				if r := out[id]; r != nil {
					r.Elicitations = append(r.Elicitations, e)
				}
				return nil
			}); err != nil {
			return err
		}
		return each(recoveryOpenTurnsSQL, []any{sessionIDs, berth.EventTurnStarted, berth.EventTurnEnded}, func(rows pgx.Rows) error {
			e := &berth.Event{Type: berth.EventTurnStarted}
			var t *int64
			var data *string
			if err := rows.Scan(&e.SessionID, &e.Seq, &e.TurnID, &t, &data); err != nil {
				return err
			}
			if t != nil {
				e.Time = codec.FromNanos(*t)
			}
			if data != nil {
				e.Data = []byte(*data)
			}
			if r := out[e.SessionID]; r != nil {
				r.OpenTurn = e
			}
			return nil
		})
	})
	if err != nil {
		return nil, internal(err, "list recovery")
	}
	return out, nil
}

// prefixed scans a row whose first column is read into first and whose
// others are what the caller's Scan asks for.
type prefixed struct {
	pgx.Row
	first *string
}

// Scan implements pgx.Row.
func (p prefixed) Scan(dest ...any) error {
	return p.Row.Scan(append([]any{p.first}, dest...)...)
}
