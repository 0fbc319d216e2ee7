package eventlog

import (
	"cmp"
	"context"
	"slices"
)

// holdBytes takes, for each session of req, the bytes of its events' data
// from that session's budget, waiting for room (Options.SessionBytes).
// Sessions are taken in id order, so two requests never wait on each other.
func (l *Log) holdBytes(ctx context.Context, req *request) error {
	if l.sessBytes <= 0 {
		return nil
	}
	type share struct {
		id string
		n  int
	}
	var shares []share
	for i := range req.events {
		e := &req.events[i]
		j := slices.IndexFunc(shares, func(s share) bool { return s.id == e.SessionID })
		if j < 0 {
			shares = append(shares, share{id: e.SessionID})
			j = len(shares) - 1
		}
		shares[j].n += len(e.Data)
	}
	slices.SortFunc(shares, func(a, b share) int { return cmp.Compare(a.id, b.id) })
	for _, s := range shares {
		if s.n == 0 {
			continue
		}
		b := l.hubFor(s.id).bytes
		if err := b.acquire(ctx, s.n); err != nil {
			req.releaseBytes()
			return err
		}
		req.holds = append(req.holds, hold{b: b, n: s.n})
	}
	return nil
}

// releaseBytes gives back the session bytes req holds.
func (req *request) releaseBytes() {
	for _, h := range req.holds {
		h.b.release(h.n)
	}
	req.holds = nil
}

// WaitRoom blocks until n more bytes of event data fit in the session's
// budget (Options.SessionBytes), without taking them: a producer that must
// append under a lock of its own waits here first, outside it, so that its
// Append then rarely waits. It returns at once when sessions are unbounded,
// ctx.Err() when ctx ends first, and EUnavailable once the log is closed.
func (l *Log) WaitRoom(ctx context.Context, sessionID string, n int) error {
	if l.sessBytes <= 0 || n <= 0 {
		return nil
	}
	b := l.hubFor(sessionID).bytes
	// Waiting in line with the appends keeps their order fair.
	if err := b.acquire(ctx, n); err != nil {
		return err
	}
	b.release(n)
	return nil
}

// InFlight returns the bytes of a session's event data enqueued and not
// yet committed, and the most there ever were at once (while the log has
// kept the session in memory). Both are 0 when sessions are unbounded.
func (l *Log) InFlight(sessionID string) (now, peak int) {
	h := l.lookup(sessionID)
	if h == nil || h.bytes == nil {
		return 0, 0
	}
	return h.bytes.usage()
}
