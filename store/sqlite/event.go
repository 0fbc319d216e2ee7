package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// insertChunks are the row counts of the prepared multi-row INSERTs,
// largest first. A batch is cut greedily into chunks of these sizes, so a
// batch of 1000 events costs 10 statement executions instead of 1000.
// 256 rows use 1536 of SQLite's 32766 bind parameters.
var insertChunks = [...]int{256, 64, 16, 4, 1}

// eventColumns is the number of bound values per inserted event.
const eventColumns = 6

// insertEventsSQL is an INSERT of n events. OR ROLLBACK: a duplicate
// (session, seq) ends the whole transaction at once, which AppendEvents
// wants anyway, and spares SQLite the statement journal it would otherwise
// keep to undo just the failing statement.
func insertEventsSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT OR ROLLBACK INTO events (session_pk, seq, turn_id, type, time, data) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?,?,?,?,?,?)`)
	}
	return b.String()
}

// bumpLastSeqSQL moves a session's last_seq and agent_offset (its high-water
// marks: they never go back) and returns its key; it returns no row when the
// session does not exist, which is how AppendEvents finds out.
const bumpLastSeqSQL = `UPDATE sessions SET last_seq = max(last_seq, ?), agent_offset = max(agent_offset, ?)
WHERE id = ? RETURNING pk`

const lastSeqSQL = `SELECT last_seq FROM sessions WHERE id = ?`

// rareTypesTerm is the WHERE clause of the partial index events_by_type
// (migration 0002), verbatim: SQLite uses a partial index only for a query
// that repeats its clause.
const rareTypesTerm = `type NOT IN ('agent_message', 'agent_thought')`

// sessionKey selects the session's key; the scalar subquery runs once and
// is an equality on the first column of the events key and index.
const sessionKey = `session_pk = (SELECT pk FROM sessions WHERE id = ?)`

// listEventsSQL is the page statement of one kind. Each reads one range of
// the primary key or of events_by_type that ends with seq, so SQLite reads
// rows in order and only the ones it returns or, for a chunk type or a
// turn, a dense range around them. The indexed variants name their index:
// without statistics the planner prefers the primary key and would walk
// the session's whole log to find one rare type.
func listEventsSQL(k codec.PageKind) string {
	const cols = `SELECT seq, turn_id, type, time, data FROM events`
	const page = ` ORDER BY seq LIMIT ?`
	switch k {
	case codec.PageByType:
		return cols + ` INDEXED BY events_by_type WHERE ` + sessionKey + ` AND type = ? AND ` + rareTypesTerm + ` AND seq > ?` + page
	case codec.PageByChunkType:
		return cols + ` WHERE ` + sessionKey + ` AND seq > ? AND type = ?` + page
	case codec.PageByTurn:
		// type = ?5 OR ?5 = '': one statement for "any type" and a chunk
		// type (the LIMIT's anonymous ? is then ?6).
		return cols + ` WHERE ` + sessionKey + ` AND seq > ? AND seq <= ? AND turn_id = ? AND (type = ?5 OR ?5 = '')` + page
	case codec.PageByTypeInTurn:
		return cols + ` INDEXED BY events_by_type WHERE ` + sessionKey + ` AND type = ? AND ` + rareTypesTerm +
			` AND seq > ? AND seq <= ? AND turn_id = ?` + page
	}
	return cols + ` WHERE ` + sessionKey + ` AND seq > ?` + page
}

// turnBoundsSQL reads the seq range a turn's events lie in.
const turnBoundsSQL = `SELECT first_seq, last_seq FROM turns WHERE ` + sessionKey + ` AND turn_id = ?`

// upsertTurnSQL widens a turn's seq range to cover newly appended events.
const upsertTurnSQL = `INSERT INTO turns (session_pk, turn_id, first_seq, last_seq) VALUES (?, ?, ?, ?)
ON CONFLICT (session_pk, turn_id) DO UPDATE SET
    first_seq = min(first_seq, excluded.first_seq), last_seq = max(last_seq, excluded.last_seq)`

// AppendEvents writes events of any number of sessions in one transaction
// and moves each session's last_seq to its highest seq in the batch and its
// agent_offset to its highest Event.Source in the batch. All
// or nothing: EInvalid for an event without session or with seq < 1,
// ENotFound if a session does not exist, EConflict if a (session, seq)
// already exists or appears twice in the batch.
func (s *Store) AppendEvents(ctx context.Context, events []berth.Event) error {
	tops, at, err := codec.Tops(events)
	if err != nil || len(tops) == 0 {
		return err
	}
	if err := s.stmtsReady(ctx); err != nil {
		return internal(err, "append events")
	}

	// Inserting each session's events as one run touches each B-tree page
	// once, instead of hopping between the sessions' pages.
	if len(tops) > 1 {
		events = groupBySession(events, at, len(tops))
	}

	return s.inTx(ctx, func(tx *sql.Tx) error {
		bump := tx.StmtContext(ctx, s.bumpLastSeq)
		// The sessions' keys, by index in tops.
		pks := make([]int64, len(tops))
		for i, t := range tops {
			err := bump.QueryRowContext(ctx, t.Seq, t.Src, t.Session).Scan(&pks[i])
			if err := codec.OneRow(err, "append events", "session %s not found", t.Session); err != nil {
				return err
			}
		}
		var stmts [len(insertChunks)]*sql.Stmt
		args := make([]any, 0, eventColumns*insertChunks[0])
		for rest := events; len(rest) > 0; {
			// The largest chunk that fits what is left.
			c := 0
			for insertChunks[c] > len(rest) {
				c++
			}
			n := insertChunks[c]
			if stmts[c] == nil {
				stmts[c] = tx.StmtContext(ctx, s.insertEvents[c])
			}
			args = args[:0]
			for i := range rest[:n] {
				e := &rest[i]
				args = append(args, pks[at[e.SessionID]], e.Seq, e.TurnID, e.Type, codec.TimeArg(e), codec.DataArg(e))
			}
			if _, err := stmts[c].ExecContext(ctx, args...); err != nil {
				if isConstraint(err) {
					return berth.WrapError(berth.EConflict, err, "event seq already exists")
				}
				return internal(err, "append events")
			}
			rest = rest[n:]
		}
		// Widen each turn's seq range: one row per turn in the batch.
		upsert := tx.StmtContext(ctx, s.upsertTurn)
		for _, r := range codec.TurnRanges(events) {
			if _, err := upsert.ExecContext(ctx, pks[at[r.Session]], r.Turn, r.First, r.Last); err != nil {
				return internal(err, "append events")
			}
		}
		return nil
	})
}

// groupBySession returns a copy of events with each session's events
// together, sessions in order of first appearance and each session's
// events in their original order (a counting sort: no comparisons).
func groupBySession(events []berth.Event, at map[string]int, sessions int) []berth.Event {
	next := make([]int, sessions+1)
	for i := range events {
		next[at[events[i].SessionID]+1]++
	}
	for k := 1; k <= sessions; k++ {
		next[k] += next[k-1]
	}
	out := make([]berth.Event, len(events))
	for i := range events {
		k := at[events[i].SessionID]
		out[next[k]] = events[i]
		next[k]++
	}
	return out
}

// ListEvents returns events of a session with seq > f.After in seq order,
// at most f.Limit (0 means berth.DefaultEventLimit; more than
// berth.MaxEventLimit is clamped), filtered by type and turn. A session
// that does not exist has no events. EInvalid for a negative After or Limit.
func (s *Store) ListEvents(ctx context.Context, sessionID string, f berth.EventFilter) ([]berth.Event, error) {
	if err := s.stmtsReady(ctx); err != nil {
		return nil, internal(err, "list events")
	}
	p, empty, err := codec.PlanPage(f, func(turn string) (int64, int64, bool, error) {
		return s.turnBounds(ctx, sessionID, turn)
	})
	if err != nil || empty {
		return []berth.Event{}, err
	}
	args := p.Args(sessionID)
	rows, err := s.listEvents[p.Kind].QueryContext(ctx, args...)
	if err != nil {
		return nil, internal(err, "list events")
	}
	defer rows.Close()
	out := make([]berth.Event, 0, min(p.Limit, 128))
	bytes := 0
	for (f.MaxBytes <= 0 || bytes < f.MaxBytes) && rows.Next() {
		e := berth.Event{SessionID: sessionID}
		var t sql.NullInt64
		var data []byte
		if err := rows.Scan(&e.Seq, &e.TurnID, &e.Type, &t, &data); err != nil {
			return nil, internal(err, "list events")
		}
		if t.Valid {
			e.Time = codec.FromNanos(t.Int64)
		}
		if data != nil {
			e.Data = data
		}
		bytes += len(data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "list events")
	}
	return out, nil
}

// turnBounds returns the seq range a turn's events lie in. ok is false for
// a turn the session does not have.
func (s *Store) turnBounds(ctx context.Context, sessionID, turnID string) (lo, hi int64, ok bool, err error) {
	err = s.turnBoundsStmt.QueryRowContext(ctx, sessionID, turnID).Scan(&lo, &hi)
	ok, err = codec.Found(err, "find turn")
	return lo, hi, ok, err
}

// LastSeq returns the highest committed seq of a session (0 if it has no
// events). ENotFound if the session is absent.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	if err := s.stmtsReady(ctx); err != nil {
		return 0, internal(err, "read last seq")
	}
	var n int64
	err := s.lastSeq.QueryRowContext(ctx, sessionID).Scan(&n)
	if err := codec.OneRow(err, "read last seq", "session %s not found", sessionID); err != nil {
		return 0, err
	}
	return n, nil
}
