package egress

import (
	"context"
	"net/http"
	"slices"

	"github.com/berth-sh/berth"
)

// question is one pending Hooks.Ask about a target; the connections to
// it wait for done, then read d and err.
type question struct {
	done chan struct{}
	// waiting counts the connections that asked it or joined it (under
	// the session's lock).
	waiting int
	d       Decision
	err     error
}

// question asks about h:port, or joins the question pending about it,
// and waits for the answer or for ctx to end.
func (s *Session) question(ctx context.Context, h berth.NetworkHost, port int) (Decision, error) {
	t := target{h.String(), port}
	s.mu.Lock()
	q := s.asking[t]
	if q == nil {
		if s.closed {
			s.mu.Unlock()
			return Reject, refused(http.StatusServiceUnavailable, "this session's proxy is closed")
		}
		q = &question{done: make(chan struct{})}
		s.asking[t] = q
		s.wg.Add(1)
		// The question is the session's, not the connection's: it is
		// answered (and an AllowSession kept) even if the asker leaves.
		go s.put(q, h, port)
	}
	q.waiting++
	s.mu.Unlock()
	select {
	case <-q.done:
		return q.d, q.err
	case <-ctx.Done():
		return Reject, ctx.Err()
	}
}

// put asks Hooks.Ask about h:port and records its answer.
func (s *Session) put(q *question, h berth.NetworkHost, port int) {
	defer s.wg.Done()
	defer close(q.done)
	t := target{h.String(), port}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.AskTimeout)
	d, err := s.hooks.Ask(ctx, s.id, t.host, port)
	cancel()
	if err != nil || (d != AllowOnce && d != AllowSession) {
		d = Reject
	}
	added := ""
	s.mu.Lock()
	delete(s.asking, t)
	switch d {
	case Reject:
		prune(s.rejected, s.opts.Now(), s.opts.Window)
		s.rejected[t] = s.opts.Now()
	case AllowSession:
		if e := (berth.NetworkEntry{NetworkHost: h, Port: port}); !slices.Contains(s.allow, e.String()) {
			s.entries = append(s.entries, e)
			s.allow = append(s.allow, e.String())
			added = e.String()
		}
	}
	s.mu.Unlock()
	if added != "" && s.hooks.Allowed != nil {
		s.hooks.Allowed(s.id, added)
	}
	q.d, q.err = d, err
}
