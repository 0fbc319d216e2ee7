package codec

import (
	"slices"
	"unsafe"

	"github.com/berth-sh/berth"
)

// TimeArg is the stored form of an event's time: unix nanoseconds, or nil
// (NULL) for the zero time.
func TimeArg(e *berth.Event) any {
	if n, ok := ToNanos(e.Time); ok {
		return n
	}
	return nil
}

// DataArg is the stored form of an event's data: JSON text, or nil (NULL)
// when there is none.
func DataArg(e *berth.Event) any {
	if e.Data == nil {
		return nil
	}
	// The data is read-only once logged (readers share it), and drivers
	// copy a string argument into their own buffers during the call: a
	// string over the same bytes saves copying the data once more here.
	return unsafe.String(unsafe.SliceData(e.Data), len(e.Data))
}

// IsChunkType reports whether events of type t are left out of the
// partial type index both backends keep: the streamed text chunks that are
// nearly all of a busy log.
func IsChunkType(t string) bool { return t == berth.EventAgentMessage || t == berth.EventAgentThought }

// TurnRange is the seq range of one turn's events in a batch.
type TurnRange struct {
	Session, Turn string
	First, Last   int64
}

// TurnRanges returns the seq range of each turn in a batch, in order of
// first appearance. Events of a turn come in runs, so the last range seen
// answers almost every lookup.
func TurnRanges(events []berth.Event) []TurnRange {
	var out []TurnRange
	for i := range events {
		e := &events[i]
		if e.TurnID == "" {
			continue
		}
		k := len(out) - 1
		if k < 0 || out[k].Turn != e.TurnID || out[k].Session != e.SessionID {
			k = slices.IndexFunc(out, func(r TurnRange) bool { return r.Turn == e.TurnID && r.Session == e.SessionID })
		}
		if k < 0 {
			out = append(out, TurnRange{Session: e.SessionID, Turn: e.TurnID, First: e.Seq, Last: e.Seq})
			continue
		}
		out[k].First, out[k].Last = min(out[k].First, e.Seq), max(out[k].Last, e.Seq)
	}
	return out
}

// PageKind says which statement answers an event page.
type PageKind int

// The page statements every backend has.
const (
	PageAll          PageKind = iota // no filter: the primary key
	PageByType                       // a rare type: the partial type index
	PageByChunkType                  // a chunk type: the primary key
	PageByTurn                       // a turn (and maybe a chunk type): a primary key range
	PageByTypeInTurn                 // a rare type in a turn: a range of the type index
	PageKinds
)

// Page is how one ListEvents call is answered: the statement, and the seq
// range (After, Upper] it reads. Upper is only set for a turn.
type Page struct {
	Kind  PageKind
	After int64
	Upper int64
	Type  string
	Turn  string
	Limit int
}

// PlanPage checks f and chooses how to answer it. bounds returns the seq
// range of a turn (ok false when the session has no such turn) and is only
// called for a turn filter. empty reports a page that has no events without
// a query. EInvalid for a negative After or Limit.
func PlanPage(f berth.EventFilter, bounds func(turn string) (lo, hi int64, ok bool, err error)) (p Page, empty bool, err error) {
	if f.After < 0 || f.Limit < 0 {
		return p, false, berth.Errorf(berth.EInvalid, "after and limit must not be negative")
	}
	p = Page{After: f.After, Type: f.Type, Turn: f.TurnID, Limit: f.Limit}
	if p.Limit == 0 {
		p.Limit = berth.DefaultEventLimit
	}
	p.Limit = min(p.Limit, berth.MaxEventLimit)
	switch {
	case f.TurnID == "" && f.Type == "":
		p.Kind = PageAll
	case f.TurnID == "" && IsChunkType(f.Type):
		p.Kind = PageByChunkType
	case f.TurnID == "":
		p.Kind = PageByType
	default:
		// A turn's events lie between its first and last seq: page that range.
		lo, hi, ok, err := bounds(f.TurnID)
		if err != nil || !ok {
			return p, true, err
		}
		p.After, p.Upper = max(f.After, lo-1), hi
		p.Kind = PageByTurn
		if f.Type != "" && !IsChunkType(f.Type) {
			p.Kind = PageByTypeInTurn
		}
	}
	return p, false, nil
}

// Args returns the values of the page's statement, in the order every
// backend's statement for that kind names them, the limit last:
//
//	PageAll:          session, after
//	PageByChunkType:  session, after, type
//	PageByType:       session, type, after
//	PageByTypeInTurn: session, type, after, upper, turn
//	PageByTurn:       session, after, upper, turn, type ("" for any)
func (p Page) Args(sessionID string) []any {
	var args []any
	switch p.Kind {
	case PageAll:
		args = []any{sessionID, p.After}
	case PageByChunkType:
		args = []any{sessionID, p.After, p.Type}
	case PageByType:
		args = []any{sessionID, p.Type, p.After}
	case PageByTypeInTurn:
		args = []any{sessionID, p.Type, p.After, p.Upper, p.Turn}
	case PageByTurn:
		args = []any{sessionID, p.After, p.Upper, p.Turn, p.Type}
	}
	return append(args, p.Limit)
}

// Top is where a batch of events takes one session: its highest seq, and
// its highest agent offset (Event.Source).
type Top struct {
	Session  string
	Seq, Src int64
}

// Tops checks a batch of events for AppendEvents and returns the top of
// each session in it, in order of first appearance, and the index in tops
// of each session id. EInvalid, naming the event, for an event without a
// session id, with a seq below 1 or with a time int64 nanoseconds cannot
// hold.
func Tops(events []berth.Event) (tops []Top, at map[string]int, err error) {
	at = map[string]int{}
	for i := range events {
		e := &events[i]
		if e.SessionID == "" || e.Seq < 1 {
			return nil, nil, berth.Errorf(berth.EInvalid, "event %d: needs a session id and a seq >= 1", i)
		}
		if _, ok := ToNanos(e.Time); !ok && !e.Time.IsZero() {
			return nil, nil, berth.Errorf(berth.EInvalid, "event %d: time out of range", i)
		}
		if j, ok := at[e.SessionID]; ok {
			tops[j].Seq = max(tops[j].Seq, e.Seq)
			tops[j].Src = max(tops[j].Src, e.Source)
			continue
		}
		at[e.SessionID] = len(tops)
		tops = append(tops, Top{Session: e.SessionID, Seq: e.Seq, Src: e.Source})
	}
	return tops, at, nil
}
