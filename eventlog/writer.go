package eventlog

import (
	"context"
	"time"

	"github.com/berth-sh/berth"
)

// writerState is what the writer goroutine reuses from batch to batch.
type writerState struct {
	batch    []*request
	events   []berth.Event // the batch as the store gets it
	sessions map[string]*sessionBatch
	order    []*sessionBatch // the batch's sessions, in order of appearance
	spare    []*sessionBatch // sessionBatches to reuse
}

// sessionBatch is one session's share of a batch.
type sessionBatch struct {
	hub    *hub
	seq    int64         // the last seq given out
	events []berth.Event // in seq order, for publishing
}

// reset empties w for the next attempt, dropping references to event data.
func (w *writerState) reset() {
	clear(w.events)
	w.events = w.events[:0]
	for _, sb := range w.order {
		clear(sb.events)
		sb.events, sb.hub = sb.events[:0], nil
		w.spare = append(w.spare, sb)
	}
	clear(w.order)
	w.order = w.order[:0]
	if w.sessions == nil {
		w.sessions = make(map[string]*sessionBatch)
	}
	clear(w.sessions)
}

// run is the writer goroutine: it takes whatever is queued, commits it as
// one batch, and repeats until the log is closing and the queue is empty.
func (l *Log) run() {
	defer l.doneOnce.Do(func() { close(l.done) })
	w := &l.writerBuf
	for {
		batch, events := l.take(w.batch[:0])
		if batch == nil {
			w.reset()
			return
		}
		w.batch = batch
		l.commit(w, batch)
		clear(batch)
		// Only now may producers fill the room again: the memory bound
		// covers events in flight, not just queued ones.
		l.budget.release(events)
	}
}

// take waits for queued requests and removes from the queue the oldest
// ones, up to maxBatch events (at least one request). It returns them and
// their event count, or nil once the log is closing and drained.
func (l *Log) take(buf []*request) ([]*request, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.head == len(l.queue) {
		if l.state == stateClosing {
			return nil, 0
		}
		l.mu.Unlock()
		<-l.wake
		l.mu.Lock()
	}
	n, k := 0, l.head
	for ; k < len(l.queue); k++ {
		m := len(l.queue[k].events)
		if k > l.head && n+m > l.maxBatch {
			break
		}
		n += m
	}
	buf = append(buf, l.queue[l.head:k]...)
	clear(l.queue[l.head:k])
	l.head = k
	// Reuse the queue's array: rewind it when empty, slide the rest down
	// when most of it is consumed, so it never grows without bound.
	if l.head == len(l.queue) {
		l.queue, l.head = l.queue[:0], 0
	} else if l.head > cap(l.queue)/2 {
		m := copy(l.queue, l.queue[l.head:])
		clear(l.queue[m:])
		l.queue, l.head = l.queue[:m], 0
	}
	return buf, n
}

// commit writes a batch and settles each of its requests, in order. When
// the store rejects the batch because of its content (a duplicate seq, a
// session deleted meanwhile), each request is retried alone, so one bad
// request fails alone and does not take the others' events with it.
func (l *Log) commit(w *writerState, batch []*request) {
	err := l.write(w, batch)
	// A cluster node that lost the lease of some sessions: their requests
	// fail with ELeaseLost and the rest commit together, at once. Each
	// round fails at least one more request, so it ends.
	for berth.IsCode(err, berth.ELeaseLost) {
		lost := fencedOut(err)
		n := 0
		for _, req := range batch {
			if !req.flush && req.err == nil && touches(req, lost) {
				req.err = err
				n++
			}
		}
		if n == 0 {
			break
		}
		l.logger.Warn("eventlog: lease lost, retrying the batch without its sessions",
			"sessions", len(lost), "requests", n, "err", err)
		err = l.write(w, batch)
	}
	if err != nil && retryAlone(err) && pending(batch) > 1 {
		l.logger.Warn("eventlog: batch rejected, retrying its requests one by one",
			"requests", len(batch), "err", err)
		for _, req := range batch {
			if !req.flush && req.err == nil {
				// write may also set req.err itself (unknown session).
				if err := l.write(w, []*request{req}); err != nil {
					req.err = err
				}
			}
			l.settle(req)
		}
		return
	}
	for _, req := range batch {
		if err != nil && !req.flush && req.err == nil {
			req.err = err
		}
		l.settle(req)
	}
}

// fencedOut returns the sessions an ELeaseLost error names (its details
// "sessions", a []string: see store/internal/fence).
func fencedOut(err error) map[string]bool {
	out := map[string]bool{}
	ids, _ := berth.ErrorDetails(err)["sessions"].([]string)
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// touches reports whether req carries events of a session in ids.
func touches(req *request, ids map[string]bool) bool {
	for i := range req.events {
		if ids[req.events[i].SessionID] {
			return true
		}
	}
	return false
}

// retryAlone reports whether a store error may be caused by one request
// of a batch rather than by the store itself.
func retryAlone(err error) bool {
	switch berth.ErrorCode(err) {
	case berth.EConflict, berth.ENotFound, berth.EInvalid, berth.ELeaseLost:
		// A lost lease is one session's: the others' events commit.
		return true
	}
	return false
}

// pending counts the requests of a batch that carry events and have not
// failed yet.
func pending(batch []*request) int {
	n := 0
	for _, req := range batch {
		if !req.flush && req.err == nil {
			n++
		}
	}
	return n
}

// write gives seqs to the events of reqs, commits them in one store
// transaction and publishes them. A request whose session cannot be
// resolved gets its err set and is left out. On a failed commit the hubs
// of the batch forget their seqs, so the next attempt reloads them from
// the store, and the error is returned.
func (l *Log) write(w *writerState, reqs []*request) error {
	w.reset()
	for _, req := range reqs {
		if req.flush || req.err != nil {
			continue
		}
		if err := l.resolve(w, req); err != nil {
			req.err = err
			l.logger.Warn("eventlog: events rejected", "session_id", req.events[0].SessionID, "err", err)
			continue
		}
		for i := range req.events {
			e := &req.events[i]
			sb := w.sessions[e.SessionID]
			sb.seq++
			e.Seq = sb.seq
			sb.events = append(sb.events, *e)
			w.events = append(w.events, *e)
		}
	}
	if len(w.events) == 0 {
		return nil
	}
	began := time.Now()
	if err := l.store.AppendEvents(context.Background(), w.events); err != nil {
		for _, sb := range w.order {
			sb.hub.invalidate()
		}
		l.logger.Error("eventlog: commit failed", "events", len(w.events), "sessions", len(w.order), "err", err)
		return err
	}
	l.observer.Committed(len(w.events), time.Since(began))
	// Persisted: now, and only now, readers may see the events.
	for _, sb := range w.order {
		sb.hub.publish(sb.events)
	}
	if fn := l.onCommit.Load(); fn != nil {
		for _, sb := range w.order {
			if len(sb.events) > 0 {
				(*fn)(sb.events[0].SessionID)
			}
		}
	}
	return nil
}

// resolve makes sure every session of req is in the batch with its last
// committed seq, loading it from the store when the hub does not know it.
func (l *Log) resolve(w *writerState, req *request) error {
	for i := range req.events {
		id := req.events[i].SessionID
		if _, ok := w.sessions[id]; ok {
			continue
		}
		h := l.hubFor(id)
		last, ok := h.committed()
		if !ok {
			var typ string
			var err error
			if last, typ, err = l.loadLast(id); err != nil {
				if berth.IsCode(err, berth.ENotFound) {
					// No such session: keep no hub for it.
					l.Forget(id)
				}
				return err
			}
			h.load(last, typ)
		}
		var sb *sessionBatch
		if n := len(w.spare); n > 0 {
			sb, w.spare = w.spare[n-1], w.spare[:n-1]
		} else {
			sb = new(sessionBatch)
		}
		sb.hub, sb.seq = h, last
		w.sessions[id] = sb
		w.order = append(w.order, sb)
	}
	return nil
}

// loadLast reads a session's last seq, and the type of that event, from
// the store. ENotFound if the session does not exist.
func (l *Log) loadLast(id string) (int64, string, error) {
	ctx := context.Background()
	last, err := l.store.LastSeq(ctx, id)
	if err != nil || last == 0 {
		return last, "", err
	}
	evs, err := l.store.ListEvents(ctx, id, berth.EventFilter{After: last - 1, Limit: 1})
	if err != nil {
		return 0, "", err
	}
	if len(evs) == 0 || evs[0].Seq != last {
		return 0, "", berth.Errorf(berth.EInternal, "session %s: last seq %d is not in its log", id, last)
	}
	return last, evs[0].Type, nil
}

// settle records the outcome of a request and hands it to its waiter.
func (l *Log) settle(req *request) {
	// Committed (or failed): the session's producers may fill the room.
	req.releaseBytes()
	var err error
	switch {
	case req.quiet:
	case req.flush && req.session != "":
		l.mu.Lock()
		if f := l.unreportedOf[req.session]; f != nil {
			err = &berth.Error{Code: berth.ErrorCode(f.last),
				Message: "events appended before the flush failed to commit", Err: f.last}
			delete(l.unreportedOf, req.session)
			l.unreported = max(l.unreported-f.n, 0)
		}
		l.mu.Unlock()
	case req.flush:
		l.mu.Lock()
		if l.unreported > 0 {
			err = &berth.Error{Code: berth.ErrorCode(l.lastErr),
				Message: "events appended before the flush failed to commit", Err: l.lastErr}
			l.unreported = 0
			clear(l.unreportedOf)
		}
		l.mu.Unlock()
	case req.err != nil:
		err = req.err
		if fn := l.onRefused.Load(); fn != nil {
			for i := range req.events {
				if id := req.events[i].SessionID; i == 0 || id != req.events[i-1].SessionID {
					(*fn)(id, err)
				}
			}
		}
		l.mu.Lock()
		l.failures++
		l.lastErr = err
		if req.done == nil {
			// Nobody waits for this Append: the next Flush reports it,
			// and the next FlushSession of its session.
			l.unreported++
			if !berth.IsCode(err, berth.ENotFound) {
				l.recordFailure(req, err)
			}
		}
		l.mu.Unlock()
	}
	if req.done != nil {
		req.done <- err
	}
}

// sessionFailures counts one session's failed Appends no flush reported.
type sessionFailures struct {
	n    int64
	last error
}

// recordFailure charges a failed Append to each session it carried
// events of. l.mu is held.
func (l *Log) recordFailure(req *request, err error) {
	if l.unreportedOf == nil {
		l.unreportedOf = make(map[string]*sessionFailures)
	}
	for i := range req.events {
		id := req.events[i].SessionID
		if i > 0 && id == req.events[i-1].SessionID {
			continue
		}
		f := l.unreportedOf[id]
		if f == nil {
			f = new(sessionFailures)
			l.unreportedOf[id] = f
		}
		f.n++
		f.last = err
	}
}
