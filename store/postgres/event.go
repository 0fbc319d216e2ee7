package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// bumpLastSeqSQL moves a session's last_seq and agent_offset (its high-water
// marks: they never go back) and returns its key; it returns no row when the
// session does not exist, which is how AppendEvents finds out.
const bumpLastSeqSQL = `UPDATE sessions SET last_seq = GREATEST(last_seq, $1), agent_offset = GREATEST(agent_offset, $2)
WHERE id = $3 RETURNING pk`

// eventCopyColumns are the columns AppendEvents copies into events.
var eventCopyColumns = []string{"session_pk", "seq", "turn_id", "type", "time", "data"}

// upsertTurnsSQL widens the seq range of each turn of a batch, one row per
// turn, in one statement.
const upsertTurnsSQL = `INSERT INTO turns (session_pk, turn_id, first_seq, last_seq)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[])
ON CONFLICT (session_pk, turn_id) DO UPDATE SET
    first_seq = LEAST(turns.first_seq, excluded.first_seq),
    last_seq = GREATEST(turns.last_seq, excluded.last_seq)`

// rareTypesTerm is the WHERE clause of the partial index events_by_type
// (migration 0001), verbatim, so that the planner proves that a query
// repeating it may use the index, whatever its parameters.
const rareTypesTerm = `type NOT IN ('agent_message', 'agent_thought')`

// sessionKey selects the session's key; the scalar subquery runs once and
// is an equality on the first column of the events key and index.
const sessionKey = `session_pk = (SELECT pk FROM sessions WHERE id = $1)`

// listEventsSQL is the page statement of one kind. Each reads one range of
// the primary key or of events_by_type that ends with seq, so PostgreSQL
// reads rows in order and only the ones it returns or, for a chunk type or
// a turn, a dense range around them. The last parameter is the limit.
func listEventsSQL(k codec.PageKind) string {
	const cols = `SELECT seq, turn_id, type, time, data FROM events WHERE ` + sessionKey
	switch k {
	case codec.PageByType:
		return cols + ` AND type = $2 AND ` + rareTypesTerm + ` AND seq > $3 ORDER BY seq LIMIT $4`
	case codec.PageByChunkType:
		return cols + ` AND seq > $2 AND type = $3 ORDER BY seq LIMIT $4`
	case codec.PageByTurn:
		// type = $5 OR $5 = '': one statement for "any type" and a chunk type.
		return cols + ` AND seq > $2 AND seq <= $3 AND turn_id = $4 AND (type = $5 OR $5 = '') ORDER BY seq LIMIT $6`
	case codec.PageByTypeInTurn:
		return cols + ` AND type = $2 AND ` + rareTypesTerm + ` AND seq > $3 AND seq <= $4 AND turn_id = $5 ORDER BY seq LIMIT $6`
	}
	return cols + ` AND seq > $2 ORDER BY seq LIMIT $3`
}

// turnBoundsSQL reads the seq range a turn's events lie in.
const turnBoundsSQL = `SELECT first_seq, last_seq FROM turns WHERE ` + sessionKey + ` AND turn_id = $2`

// AppendEvents writes events of any number of sessions in one transaction
// and moves each session's last_seq to its highest seq in the batch and its
// agent_offset to its highest Event.Source in the batch. All
// or nothing: EInvalid for an event without session or with seq < 1,
// ENotFound if a session does not exist, EConflict if a (session, seq)
// already exists or appears twice in the batch. A fenced store (Fence)
// first checks every session's lease: ELeaseLost, naming in its details
// ("sessions") each session whose lease its node does not hold, and
// nothing is written. The commit notifies berth_events of each session's
// last seq (WatchEvents).
func (s *Store) AppendEvents(ctx context.Context, events []berth.Event) error {
	tops, at, err := codec.Tops(events)
	if err != nil || len(tops) == 0 {
		return err
	}
	// The sessions' keys, by index in tops.
	pks := make([]int64, len(tops))
	// Sessions are locked in id order, so two batches that share sessions
	// cannot deadlock.
	order := make([]int, len(tops))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(tops[a].Session, tops[b].Session) })

	return s.inTx(ctx, func(tx pgx.Tx) error {
		// Every session's bump in one round trip.
		b := &pgx.Batch{}
		for _, i := range order {
			b.Queue(bumpLastSeqSQL, tops[i].Seq, tops[i].Src, tops[i].Session)
		}
		// A fenced store checks every session's lease in the same round trip.
		_, fenced := s.fence.Node()
		ids := make([]string, len(order))
		if fenced {
			for j, i := range order {
				ids[j] = tops[i].Session
			}
			b.Queue(fenceSQL, ids)
		}
		// Wake every node's readers at commit (see WatchEvents).
		notices := make([]string, len(order))
		for j, i := range order {
			notices[j] = notice(tops[i].Session, tops[i].Seq)
		}
		b.Queue(notifySQL, notices)
		br := tx.SendBatch(ctx, b)
		for _, i := range order {
			err := br.QueryRow().Scan(&pks[i])
			if errors.Is(err, pgx.ErrNoRows) {
				br.Close()
				return berth.Errorf(berth.ENotFound, "session %s not found", tops[i].Session)
			}
			if err != nil {
				br.Close()
				return internal(err, "append events")
			}
		}
		if fenced {
			rows, err := br.Query()
			if err == nil {
				var leases []leaseRow
				if leases, err = fenceRows(rows); err == nil {
					err = s.fence.Check(ids, leaseOf(leases))
				}
			}
			if err != nil {
				br.Close()
				if isBerthError(err) {
					return err
				}
				return internal(err, "check leases")
			}
		}
		if _, err := br.Exec(); err != nil {
			br.Close()
			return internal(err, "announce events")
		}
		if err := br.Close(); err != nil {
			return internal(err, "append events")
		}

		// COPY, in binary: a duplicate key fails the whole statement, and
		// so the transaction.
		row := make([]any, len(eventCopyColumns))
		src := pgx.CopyFromSlice(len(events), func(i int) ([]any, error) {
			e := &events[i]
			row[0], row[1], row[2], row[3] = pks[at[e.SessionID]], e.Seq, e.TurnID, e.Type
			row[4], row[5] = codec.TimeArg(e), codec.DataArg(e)
			return row, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"events"}, eventCopyColumns, src); err != nil {
			if isUniqueViolation(err) {
				return berth.WrapError(berth.EConflict, err, "event seq already exists")
			}
			return internal(err, "append events")
		}

		// Widen each turn's seq range: one row per turn in the batch.
		ranges := codec.TurnRanges(events)
		if len(ranges) == 0 {
			return nil
		}
		// In key order, for the same reason as the sessions.
		slices.SortFunc(ranges, func(a, b codec.TurnRange) int {
			return cmp.Or(cmp.Compare(pks[at[a.Session]], pks[at[b.Session]]), cmp.Compare(a.Turn, b.Turn))
		})
		rangePKs := make([]int64, len(ranges))
		turns := make([]string, len(ranges))
		firsts := make([]int64, len(ranges))
		lasts := make([]int64, len(ranges))
		for i, r := range ranges {
			rangePKs[i], turns[i], firsts[i], lasts[i] = pks[at[r.Session]], r.Turn, r.First, r.Last
		}
		if _, err := tx.Exec(ctx, upsertTurnsSQL, rangePKs, turns, firsts, lasts); err != nil {
			return internal(err, "append events")
		}
		return nil
	})
}

// ListEvents returns events of a session with seq > f.After in seq order,
// at most f.Limit (0 means berth.DefaultEventLimit; more than
// berth.MaxEventLimit is clamped), filtered by type and turn. A session
// that does not exist has no events. EInvalid for a negative After or Limit.
func (s *Store) ListEvents(ctx context.Context, sessionID string, f berth.EventFilter) ([]berth.Event, error) {
	p, empty, err := codec.PlanPage(f, func(turn string) (int64, int64, bool, error) {
		return s.turnBounds(ctx, sessionID, turn)
	})
	if err != nil || empty {
		return []berth.Event{}, err
	}
	args := p.Args(sessionID)
	out := make([]berth.Event, 0, min(p.Limit, 128))
	var fds []pgconn.FieldDescription
	var turn, typ string
	var slab byteSlab
	bytes := 0
	err = s.query(ctx, listEventsSQL(p.Kind), args, func(rows pgx.Rows) error {
		if f.MaxBytes > 0 && bytes >= f.MaxBytes {
			// The rest of the rows are read past, not kept.
			return errPageFull
		}
		if fds == nil {
			fds = rows.FieldDescriptions()
		}
		// Columns: seq, turn_id, type, time, data (see listEventsSQL).
		raw := rows.RawValues()
		e := berth.Event{SessionID: sessionID, TurnID: interned(&turn, raw[1]), Type: interned(&typ, raw[2])}
		var err error
		if e.Seq, err = rawInt8(fds[0], raw[0]); err != nil {
			return err
		}
		// NULL time is the zero time.
		if raw[3] != nil {
			n, err := rawInt8(fds[3], raw[3])
			if err != nil {
				return err
			}
			e.Time = codec.FromNanos(n)
		}
		// NULL data stays nil.
		if raw[4] != nil {
			e.Data = slab.copy(raw[4])
			bytes += len(e.Data)
		}
		// A page that outgrows the first guess is likely a full one: grow
		// once to the limit instead of doubling (and copying) three times.
		if len(out) == cap(out) {
			out = slices.Grow(out, p.Limit-len(out))
		}
		out = append(out, e)
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, internal(err, "list events")
	}
	return out, nil
}

// errPageFull ends a page of events that reached its MaxBytes.
var errPageFull = errors.New("page full")

// turnBounds returns the seq range a turn's events lie in. ok is false for
// a turn the session does not have.
func (s *Store) turnBounds(ctx context.Context, sessionID, turnID string) (lo, hi int64, ok bool, err error) {
	err = s.queryRow(ctx, turnBoundsSQL, []any{sessionID, turnID}, &lo, &hi)
	ok, err = codec.Found(err, "find turn")
	return lo, hi, ok, err
}

// LastSeq returns the highest committed seq of a session (0 if it has no
// events). ENotFound if the session is absent.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	err := s.queryRow(ctx, `SELECT last_seq FROM sessions WHERE id = $1`, []any{sessionID}, &n)
	if err := codec.OneRow(err, "read last seq", "session %s not found", sessionID); err != nil {
		return 0, err
	}
	return n, nil
}
