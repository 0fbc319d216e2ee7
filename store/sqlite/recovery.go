package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// ofSessions selects the sessions whose ids are in the JSON array ?1: one
// parameter, whatever the number of sessions.
const ofSessions = `s.id IN (SELECT value FROM json_each(?1))`

// rowsOfSessions selects the rows of a side table (queue_entries,
// permissions) that belong to those sessions, with a given state ?2.
const rowsOfSessions = `session_pk IN (SELECT pk FROM sessions s WHERE ` + ofSessions + `) AND state = ?2`

// sessionOfRow is the id of a side table row's session.
const sessionOfRow = `(SELECT id FROM sessions WHERE pk = session_pk)`

// recoverySessionsSQL reads the sessions as getSessionSQL does, each
// after its id.
const recoverySessionsSQL = `SELECT id, ` + codec.SessionColumns +
	` FROM sessions s WHERE ` + ofSessions

// listLiveSQL lists the live sessions from the sessions_live index
// alone (its WHERE, word for word, lets the planner use it).
const listLiveSQL = `SELECT id, state, shim_socket FROM sessions WHERE state <> 'stopped'`

// ListLive implements berth.RecoveryStore in one statement.
//
// It reads through the writer: at a boot, before anything writes, that
// connection is open and has read the schema, while a reader's first
// connection would open and read it on the API's path (the readers'
// first one is Warm's).
func (s *Store) ListLive(ctx context.Context) ([]berth.LiveSession, error) {
	if s.empty.Load() {
		// Made by this Open, and no session created since.
		return []berth.LiveSession{}, nil
	}
	return collect(ctx, s.w, "list live sessions", listLiveSQL, nil, func(row codec.Row) (berth.LiveSession, error) {
		var l berth.LiveSession
		return l, row.Scan(&l.ID, &l.State, &l.ShimSocket)
	})
}

// recoveryQueueSQL lists the pending entries of the sessions, each
// session's in arrival order.
const recoveryQueueSQL = `SELECT ` + sessionOfRow + `, ` + queueColumns + ` FROM queue_entries
WHERE ` + rowsOfSessions + ` ORDER BY session_pk, ord`

// recoveryPermissionsSQL lists the pending permissions of the sessions,
// each session's in the order they were created.
const recoveryPermissionsSQL = `SELECT ` + sessionOfRow + `, ` + permissionColumns + ` FROM permissions
WHERE ` + rowsOfSessions + ` ORDER BY session_pk, ord`

// recoveryElicitationsSQL lists the pending elicitations of the
// sessions, each session's in the order they were created.
const recoveryElicitationsSQL = `SELECT ` + sessionOfRow + `, doc FROM elicitations
WHERE ` + rowsOfSessions + ` ORDER BY session_pk, ord`

// recoveryOpenTurnsSQL finds each session's last turn_started and keeps it
// when no turn_ended of its turn follows: two lookups in events_by_type per
// session (named, as in listEventsSQL, with the index's own clause).
const recoveryOpenTurnsSQL = `SELECT s.id, e.seq, e.turn_id, e.type, e.time, e.data FROM sessions s
JOIN events e INDEXED BY events_by_type ON e.session_pk = s.pk AND e.type = ?2 AND e.` + rareTypesTerm + `
    AND e.seq = (SELECT max(seq) FROM events INDEXED BY events_by_type
        WHERE session_pk = s.pk AND type = ?2 AND ` + rareTypesTerm + `)
WHERE ` + ofSessions + ` AND NOT EXISTS (SELECT 1 FROM events INDEXED BY events_by_type
    WHERE session_pk = s.pk AND type = ?3 AND ` + rareTypesTerm + ` AND seq > e.seq AND turn_id = e.turn_id)`

// ListRecovery reads the session, its open turn, its pending queue
// entries, its pending permissions and its pending elicitations of every
// session named, in one read transaction of five statements. Sessions
// that do not exist are absent from the map.
func (s *Store) ListRecovery(ctx context.Context, sessionIDs []string) (map[string]*berth.Recovery, error) {
	out := make(map[string]*berth.Recovery, len(sessionIDs))
	if len(sessionIDs) == 0 {
		return out, nil
	}
	ids, err := json.Marshal(sessionIDs)
	if err != nil {
		return nil, internal(err, "list recovery")
	}
	of := func(id string) *berth.Recovery {
		r := out[id]
		if r == nil {
			r = &berth.Recovery{}
			out[id] = r
		}
		return r
	}
	err = s.inReadTx(ctx, func(tx *sql.Tx) error {
		// Every session that exists has an entry, with the session itself.
		if err := eachRow(ctx, tx, "list recovery", recoverySessionsSQL, []any{string(ids)}, func(rows *sql.Rows) error {
			var id string
			sess, err := codec.ScanSession(func(dest ...any) error { return rows.Scan(append([]any{&id}, dest...)...) }, "")
			if err != nil {
				return err
			}
			of(id).Session = sess
			return nil
		}); err != nil {
			return err
		}
		positions := map[[2]string]int{}
		if err := eachRow(ctx, tx, "list recovery", recoveryQueueSQL, []any{string(ids), berth.EntryPending}, func(rows *sql.Rows) error {
			var id string
			var ord int64
			e := &berth.QueueEntry{}
			var created *int64
			var content string
			if err := rows.Scan(&id, &ord, &e.ID, &e.Kind, &e.State, &e.Generation, &e.TurnID, &e.Text, &created, &content); err != nil {
				return err
			}
			var err error
			if e.Content, err = codec.DecodeContent(content); err != nil {
				return err
			}
			e.SessionID, e.CreatedAt = id, codec.FromNullNanos(created)
			// Positions count per kind, in the arrival order the rows come in.
			positions[[2]string{id, e.Kind}]++
			e.Position = positions[[2]string{id, e.Kind}]
			r := of(id)
			r.Queue = append(r.Queue, e)
			return nil
		}); err != nil {
			return err
		}
		if err := eachRow(ctx, tx, "list recovery", recoveryPermissionsSQL, []any{string(ids), berth.PermissionPending}, func(rows *sql.Rows) error {
			var id string
			p := &berth.Permission{}
			var toolCall, options []byte
			var created, decided *int64
			if err := rows.Scan(&id, &p.ID, &p.TurnID, &p.State, &toolCall, &options, &p.OptionID, &p.DecidedBy, &created, &decided); err != nil {
				return err
			}
			p.SessionID, p.ToolCall, p.CreatedAt = id, toolCall, codec.FromNullNanos(created)
			if err := json.Unmarshal(options, &p.Options); err != nil {
				return berth.WrapError(berth.EInternal, err, "decode stored permission options")
			}
			if decided != nil {
				at := codec.FromNanos(*decided)
				p.DecidedAt = &at
			}
			r := of(id)
			r.Pending = append(r.Pending, p)
			return nil
		}); err != nil {
			return err
		}
		if err := eachRow(ctx, tx, "list recovery", recoveryElicitationsSQL, []any{string(ids), berth.ElicitationPending}, func(rows *sql.Rows) error {
			id, e, err := codec.ScanSessionElicitation(rows)
			if err != nil {
				return err
			}
			r := of(id)
			r.Elicitations = append(r.Elicitations, e)
			return nil
		}); err != nil {
			return err
		}
		return eachRow(ctx, tx, "list recovery", recoveryOpenTurnsSQL, []any{string(ids), berth.EventTurnStarted, berth.EventTurnEnded}, func(rows *sql.Rows) error {
			e := &berth.Event{}
			var t sql.NullInt64
			var data []byte
			if err := rows.Scan(&e.SessionID, &e.Seq, &e.TurnID, &e.Type, &t, &data); err != nil {
				return err
			}
			if t.Valid {
				e.Time = codec.FromNanos(t.Int64)
			}
			if data != nil {
				e.Data = data
			}
			of(e.SessionID).OpenTurn = e
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
