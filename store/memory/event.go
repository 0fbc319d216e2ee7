package memory

import (
	"context"
	"slices"
	"sort"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/store/internal/codec"
)

// storedEvent is one event as kept: its time in unix nanoseconds, as the
// SQL stores keep it (so it reads back in UTC), and its own copy of data.
type storedEvent struct {
	seq     int64
	turn    string
	typ     string
	nanos   int64
	hasTime bool
	data    []byte // nil when the event had none
}

// eventLog is a session's log with its indexes: every event in seq order,
// each type's events in seq order, and the seq range of each turn. Pages
// are ranges of one of them, found by binary search: a page never walks
// the log from its start.
type eventLog struct {
	all    []*storedEvent
	byType map[string][]*storedEvent
	turns  map[string]seqRange
}

// seqRange is the first and last seq of a turn's events.
type seqRange struct{ first, last int64 }

// newEventLog returns an empty log.
func newEventLog() eventLog {
	return eventLog{byType: map[string][]*storedEvent{}, turns: map[string]seqRange{}}
}

// after returns the index of the first event of evs with a seq above seq.
func after(evs []*storedEvent, seq int64) int {
	return sort.Search(len(evs), func(i int) bool { return evs[i].seq > seq })
}

// has reports whether the log holds seq.
func (l *eventLog) has(seq int64) bool {
	i := after(l.all, seq-1)
	return i < len(l.all) && l.all[i].seq == seq
}

// add puts e in the log and its indexes; its seq is not in the log.
func (l *eventLog) add(e *storedEvent) {
	l.all = insertBySeq(l.all, e)
	l.byType[e.typ] = insertBySeq(l.byType[e.typ], e)
	if e.turn != "" {
		r, ok := l.turns[e.turn]
		if !ok {
			r = seqRange{e.seq, e.seq}
		}
		l.turns[e.turn] = seqRange{min(r.first, e.seq), max(r.last, e.seq)}
	}
}

// insertBySeq inserts e in evs, sorted by seq: an append when it is the
// newest, as it nearly always is.
func insertBySeq(evs []*storedEvent, e *storedEvent) []*storedEvent {
	if n := len(evs); n == 0 || evs[n-1].seq < e.seq {
		return append(evs, e)
	}
	return slices.Insert(evs, after(evs, e.seq), e)
}

// AppendEvents writes events of any number of sessions at once and moves
// each session's LastSeq to its highest seq in the batch and its
// AgentOffset to its highest Event.Source in the batch (never back). All
// or nothing: EInvalid for an event without session or with seq < 1 or a
// time out of range, ENotFound if a session does not exist, EConflict if a
// (session, seq) already exists or appears twice in the batch.
func (s *Store) AppendEvents(ctx context.Context, events []berth.Event) error {
	tops, at, err := codec.Tops(events)
	if err != nil || len(tops) == 0 {
		return err
	}
	// Copies are made before the lock: the critical section only checks
	// and links.
	stored := make([]storedEvent, len(events))
	arena := newArena(events)
	for i := range events {
		e := &events[i]
		n, ok := codec.ToNanos(e.Time)
		stored[i] = storedEvent{seq: e.Seq, turn: e.TurnID, typ: e.Type, nanos: n, hasTime: ok, data: arena.copy(e.Data)}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// The sessions' records, by index in tops.
	rs := make([]*session, len(tops))
	ids := make([]string, len(tops))
	for i, t := range tops {
		r, err := s.lookup(t.Session)
		if err != nil {
			return err
		}
		rs[i], ids[i] = r, t.Session
	}
	if err := s.fenced(ids...); err != nil {
		return err
	}
	// Every check comes before the first change, so a refused batch leaves
	// nothing behind.
	type key struct {
		session int
		seq     int64
	}
	seen := make(map[key]struct{}, len(events))
	for i := range events {
		k := key{at[events[i].SessionID], events[i].Seq}
		if _, dup := seen[k]; dup || rs[k.session].log.has(k.seq) {
			return berth.Errorf(berth.EConflict, "event seq %d of session %s already exists", k.seq, events[i].SessionID)
		}
		seen[k] = struct{}{}
	}
	for i := range events {
		rs[at[events[i].SessionID]].log.add(&stored[i])
	}
	for i, t := range tops {
		rs[i].lastSeq = max(rs[i].lastSeq, t.Seq)
		rs[i].agentOffset = max(rs[i].agentOffset, t.Src)
	}
	return nil
}

// ListEvents returns copies of the events of a session with seq > f.After
// in seq order, at most f.Limit (0 means berth.DefaultEventLimit; more
// than berth.MaxEventLimit is clamped), filtered by type and turn. A
// session that does not exist has no events. EInvalid for a negative
// After or Limit.
func (s *Store) ListEvents(ctx context.Context, sessionID string, f berth.EventFilter) ([]berth.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	// A session that does not exist has an empty log.
	lg := &eventLog{}
	if r, ok := s.sessions[sessionID]; ok {
		lg = &r.log
	}
	p, empty, err := codec.PlanPage(f, func(turn string) (int64, int64, bool, error) {
		b, ok := lg.turns[turn]
		return b.first, b.last, ok, nil
	})
	if err != nil || empty {
		return []berth.Event{}, err
	}
	// A type filter reads that type's index; a turn bounds the range.
	src := lg.all
	if p.Type != "" {
		src = lg.byType[p.Type]
	}
	bounded := p.Kind == codec.PageByTurn || p.Kind == codec.PageByTypeInTurn
	var page []*storedEvent
	bytes := 0
	for _, e := range src[after(src, p.After):] {
		if len(page) == p.Limit || (bounded && e.seq > p.Upper) || (f.MaxBytes > 0 && bytes >= f.MaxBytes) {
			break
		}
		if p.Turn == "" || e.turn == p.Turn {
			page = append(page, e)
			bytes += len(e.data)
		}
	}
	// The page's data is copied into one allocation.
	size := 0
	for _, e := range page {
		size += len(e.data)
	}
	buf := make([]byte, 0, size)
	out := make([]berth.Event, len(page))
	for i, e := range page {
		out[i] = berth.Event{Seq: e.seq, SessionID: sessionID, TurnID: e.turn, Type: e.typ}
		if e.data != nil {
			start := len(buf)
			buf = append(buf, e.data...)
			// A full slice expression: appending to one event's data
			// cannot write over the next one's.
			out[i].Data = buf[start:len(buf):len(buf)]
		}
		if e.hasTime {
			out[i].Time = codec.FromNanos(e.nanos)
		}
	}
	return out, nil
}

// arena hands out copies of a batch's event data from one allocation. The
// allocation lives as long as any of its events: a deleted session's
// events that shared a batch with another session's stay in memory until
// that one is deleted too.
type arena struct{ buf []byte }

// newArena returns an arena that holds the data of events.
func newArena(events []berth.Event) *arena {
	size := 0
	for i := range events {
		size += len(events[i].Data)
	}
	return &arena{buf: make([]byte, 0, size)}
}

// copy returns a copy of b (nil for nil) that no other copy overlaps.
func (a *arena) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// LastSeq returns the highest committed seq of a session (0 if it has no
// events). ENotFound if the session is absent.
func (s *Store) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, err := s.lookup(sessionID)
	if err != nil {
		return 0, err
	}
	return r.lastSeq, nil
}
