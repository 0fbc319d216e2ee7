package hooks

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/ids"
)

// scanPace is the least time between two scans of the marked sessions: a
// session whose agent floods its log is read in pages, not event by event.
const scanPace = 50 * time.Millisecond

// cursorEvery bounds how often a session's stored cursor moves when its
// new events are none that a hook wants.
const cursorEvery = 2 * time.Second

// scanner turns committed events into outbox deliveries.
type scanner struct {
	s *Service

	// scanMu is held while a session is scanned, by the scanner goroutine
	// or by Flush.
	scanMu sync.Mutex

	mu     sync.Mutex
	marked map[string]struct{}
	wake   chan struct{} // capacity 1: marked is not empty

	// cursors caches, per session, the seq up to which deliveries are
	// enqueued, and written when the stored cursor last moved; only the
	// scanner goroutine touches them.
	cursors map[string]int64
	written map[string]time.Time
}

func newScanner(s *Service) *scanner {
	return &scanner{s: s, marked: map[string]struct{}{}, wake: make(chan struct{}, 1), cursors: map[string]int64{},
		written: map[string]time.Time{}}
}

// mark records that a session's log grew; it never waits.
func (sc *scanner) mark(id string) {
	sc.mu.Lock()
	sc.marked[id] = struct{}{}
	sc.mu.Unlock()
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// all marks every session in the store, so that events committed while no
// daemon ran are enqueued.
func (sc *scanner) all(ctx context.Context) {
	f := berth.SessionFilter{Limit: 1000}
	for ctx.Err() == nil {
		page, err := sc.s.o.Store.ListSessions(ctx, f)
		if err != nil {
			if ctx.Err() == nil {
				sc.s.log.Warn("hooks: listing sessions failed", "err", err)
			}
			return
		}
		for _, ses := range page.Sessions {
			sc.mark(ses.ID)
		}
		if page.NextCursor == "" || page.NextCursor == f.Cursor {
			return
		}
		f.Cursor = page.NextCursor
	}
}

// run scans the marked sessions until ctx ends.
func (sc *scanner) run(ctx context.Context) {
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-sc.wake:
		case <-ctx.Done():
			return
		}
		sc.mu.Lock()
		marked := sc.marked
		sc.marked = make(map[string]struct{}, len(marked))
		sc.mu.Unlock()
		for id := range marked {
			sc.scanMu.Lock()
			err := sc.session(ctx, id)
			sc.scanMu.Unlock()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// The cursor did not move: the next mark (or start) reads
				// the same events again.
				sc.s.log.Warn("hooks: scanning a session failed", "session_id", id, "err", err)
				delete(sc.cursors, id)
			}
		}
		pace.Reset(scanPace)
		select {
		case <-pace.C:
		case <-ctx.Done():
			return
		}
	}
}

// session enqueues the deliveries of a session's events after its cursor.
// It reads only the event types some hook wants, each from the store's
// by-type index, up to the session's last seq as it was first read; the
// cursor moves to that seq, so an event committed meanwhile is read by the
// next pass (its commit marks the session again).
func (sc *scanner) session(ctx context.Context, id string) error {
	s := sc.s
	cur, ok := sc.cursors[id]
	if !ok {
		c, found, err := s.store.GetHookCursor(ctx, id)
		if err != nil {
			return err
		}
		if found {
			cur = c.Seq
		}
	}
	last, err := s.o.Store.LastSeq(ctx, id)
	if berth.IsCode(err, berth.ENotFound) {
		// Deleted: its log went with it.
		delete(sc.cursors, id)
		return nil
	}
	if err != nil {
		return err
	}
	if last <= cur {
		sc.cursors[id] = cur
		return nil
	}
	var evs []berth.Event
	for _, typ := range s.types {
		after := cur
		for {
			page, err := s.o.Store.ListEvents(ctx, id, berth.EventFilter{After: after, Type: typ, Limit: berth.MaxEventLimit})
			if berth.IsCode(err, berth.ENotFound) {
				delete(sc.cursors, id)
				return nil
			}
			if err != nil {
				return err
			}
			for _, e := range page {
				if e.Seq <= last {
					evs = append(evs, e)
				}
			}
			if len(page) < berth.MaxEventLimit || page[len(page)-1].Seq >= last {
				break
			}
			after = page[len(page)-1].Seq
		}
	}
	slices.SortFunc(evs, func(a, b berth.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	var ds []*berth.HookDelivery
	if len(evs) > 0 {
		ses, err := s.sess.GetSession(ctx, id)
		if berth.IsCode(err, berth.ENotFound) {
			delete(sc.cursors, id)
			return nil
		}
		if err != nil {
			return err
		}
		for i := range evs {
			for _, h := range s.hooks {
				if h.wants(evs[i].Type, ses) {
					d, err := s.newDelivery(h, &evs[i], ses)
					if err != nil {
						return err
					}
					ds = append(ds, d)
				}
			}
		}
	}
	// A pass that found nothing for any hook moves the stored cursor at
	// most every cursorEvery: after a crash the events in between are
	// read again, and yield nothing again.
	now := time.Now()
	if len(ds) == 0 && now.Sub(sc.written[id]) < cursorEvery {
		sc.cursors[id] = last
		return nil
	}
	if err := s.store.EnqueueHookDeliveries(ctx, id, berth.HookCursor{Seq: last}, ds); err != nil {
		return err
	}
	sc.cursors[id], sc.written[id] = last, now
	if len(ds) > 0 {
		s.enqueued.Add(int64(len(ds)))
		s.wakeAll()
	}
	return nil
}

// payload is the JSON a hook gets: the Event's fields plus the session.
type payload struct {
	berth.Event
	Session *berth.Session `json:"session"`
}

// newDelivery builds h's delivery of event e of session ses. Event data
// over MaxEventBytes is replaced by its size, so a body stays small
// whatever an agent printed.
func (s *Service) newDelivery(h *hook, e *berth.Event, ses *berth.Session) (*berth.HookDelivery, error) {
	data := e.Data
	if len(data) > s.o.MaxEventBytes {
		data, _ = json.Marshal(map[string]any{"truncated": true, "bytes": len(e.Data)})
	}
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	ev := *e
	ev.Data = data
	body, err := json.Marshal(payload{Event: ev, Session: ses})
	if err != nil {
		return nil, berth.WrapError(berth.EInternal, err, "encode hook body")
	}
	return &berth.HookDelivery{ID: ids.New("dlv"), Hook: h.Name, HookIndex: h.Index, Event: e.Type,
		SessionID: e.SessionID, Seq: e.Seq, CreatedAt: s.o.Now().UTC(), Body: body}, nil
}
