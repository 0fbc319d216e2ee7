package eventlog

import (
	"context"
	"io"
	"sync"

	"github.com/berth-sh/berth"
)

// Stream follows a session's log from after on (after = 0: from the
// start). Recent events come from memory and older ones from the store,
// in pages of at most berth.MaxEventLimit, with no gap and no duplicate.
// Next returns io.EOF once it has returned the session's last event and
// that event is session_stopped. ENotFound if the session does not exist,
// EInvalid for a negative after.
//
// Returned events share their Data with other readers: treat it as read-only.
func (l *Log) Stream(ctx context.Context, sessionID string, after int64) (berth.EventStream, error) {
	if after < 0 {
		return nil, berth.Errorf(berth.EInvalid, "after must not be negative")
	}
	h := l.lookup(sessionID)
	if h == nil {
		// Unknown here: the store says whether the session exists before
		// a hub is made for it.
		if _, err := l.store.LastSeq(ctx, sessionID); err != nil {
			return nil, err
		}
		h = l.hubFor(sessionID)
	}
	return &stream{log: l, id: sessionID, hub: h, pos: after, posKnown: after == 0,
		closed: make(chan struct{})}, nil
}

// stream is the berth.EventStream of Log.Stream. Next is not safe for
// concurrent use; Close may be called from another goroutine to end a
// blocked Next.
type stream struct {
	log *Log
	id  string
	hub *hub
	pos int64 // the seq of the last event returned (or the start position)
	// posType is the type of the event at pos, once posKnown.
	posType  string
	posKnown bool

	closed    chan struct{}
	closeOnce sync.Once
}

// errStreamClosed is what Next returns after Close.
var errStreamClosed = berth.Errorf(berth.EUnavailable, "stream is closed")

// Next returns the next events after the stream's position, waiting for
// them to be committed if needed. See Log.Stream.
func (s *stream) Next(ctx context.Context) ([]berth.Event, error) {
	for {
		select {
		case <-s.closed:
			return nil, errStreamClosed
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Read before the snapshot below: if the writer had already ended,
		// the snapshot holds everything it ever published.
		logDone := isDone(s.log.done)

		h := s.hub
		h.mu.Lock()
		if h.gone {
			h.mu.Unlock()
			return nil, berth.Errorf(berth.ENotFound, "session %s was deleted", s.id)
		}
		wake := h.notify
		known, last, lastType := h.known, h.last, h.lastType
		var evs []berth.Event
		if known && s.pos < last {
			evs = h.ring.after(s.pos, berth.MaxEventLimit)
		}
		h.mu.Unlock()

		if evs != nil {
			return s.deliver(evs)
		}
		if known && s.pos >= last {
			// Caught up with everything committed.
			if lastType == berth.EventSessionStopped {
				return nil, io.EOF
			}
			if logDone {
				return nil, errClosed
			}
			if err := s.wait(ctx, wake); err != nil {
				return nil, err
			}
			continue
		}

		// Behind what the ring holds, or the writer has not loaded this
		// session yet: the store has the truth.
		evs, err := s.log.store.ListEvents(ctx, s.id, berth.EventFilter{After: s.pos, Limit: berth.MaxEventLimit, MaxBytes: berth.EventPageBytes})
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 {
			return s.deliver(evs)
		}
		if known {
			// Published (so committed) events are not in the store: the
			// session was deleted behind the log's back.
			if _, err := s.log.store.LastSeq(ctx, s.id); err != nil {
				return nil, err
			}
			return nil, berth.Errorf(berth.EInternal, "session %s: events after %d are missing from the store", s.id, s.pos)
		}
		stopped, err := s.endsStopped(ctx)
		if err != nil {
			return nil, err
		}
		if stopped {
			return nil, io.EOF
		}
		if logDone {
			return nil, errClosed
		}
		// wake was taken before the store read, so an event committed
		// after that read has closed it already: no lost wake-up.
		if err := s.wait(ctx, wake); err != nil {
			return nil, err
		}
	}
}

// deliver checks that evs continue the stream exactly, then moves the
// stream's position past them.
func (s *stream) deliver(evs []berth.Event) ([]berth.Event, error) {
	for i := range evs {
		if evs[i].Seq != s.pos+1+int64(i) {
			return nil, berth.Errorf(berth.EInternal, "session %s: log has seq %d where %d was due",
				s.id, evs[i].Seq, s.pos+1+int64(i))
		}
	}
	end := evs[len(evs)-1]
	s.pos, s.posType, s.posKnown = end.Seq, end.Type, true
	return evs, nil
}

// endsStopped reports whether the last event of the log, which the stream
// has reached, is session_stopped. Only used while the hub does not know
// the log; it reads the store at most twice.
func (s *stream) endsStopped(ctx context.Context) (bool, error) {
	if s.posKnown {
		return s.posType == berth.EventSessionStopped, nil
	}
	last, err := s.log.store.LastSeq(ctx, s.id)
	if err != nil || last == 0 {
		return false, err
	}
	// The stream may have started past the end of the log.
	end := min(last, s.pos)
	evs, err := s.log.store.ListEvents(ctx, s.id, berth.EventFilter{After: end - 1, Limit: 1})
	if err != nil || len(evs) == 0 {
		return false, err
	}
	if end == s.pos {
		s.posType, s.posKnown = evs[0].Type, true
	}
	return evs[0].Type == berth.EventSessionStopped, nil
}

// wait blocks until the hub publishes (wake closes), the writer ends, the
// stream is closed or ctx ends.
func (s *stream) wait(ctx context.Context, wake <-chan struct{}) error {
	select {
	case <-wake:
		return nil
	case <-s.log.done:
		return nil // the next pass sees logDone and drains what is left
	case <-s.closed:
		return errStreamClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the stream; a blocked Next returns. It is idempotent.
func (s *stream) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
