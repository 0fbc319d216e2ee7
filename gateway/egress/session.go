package egress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/berth-sh/berth"
)

// Session is the egress proxy of one session: an http.Handler, served on
// the session's listeners by Serve.
type Session struct {
	p         *Proxy
	opts      Options
	id        string
	ask       bool
	hooks     Hooks
	srv       *http.Server
	transport *http.Transport
	rp        *httputil.ReverseProxy
	log       *slog.Logger
	// slots bounds the connections in flight (Options.MaxConns).
	slots chan struct{}
	// ctx ends with Close: questions, dials and requests in flight.
	ctx    context.Context
	cancel context.CancelFunc
	// wg counts the handlers and questions running.
	wg sync.WaitGroup

	// done is closed when Close has finished.
	done chan struct{}

	mu      sync.Mutex
	closed  bool
	entries []berth.NetworkEntry
	// allow is the list as entries' canonical strings, additions last.
	allow []string
	// denied: when each refused target was last told to Hooks.Denied.
	denied map[target]time.Time
	// rejected: when each target was last refused by an answer.
	rejected map[target]time.Time
	// asking: the question pending for each target.
	asking map[target]*question
	// tunnels: both ends of each open tunnel, closed by Close.
	tunnels map[net.Conn]struct{}
}

// newSession returns the proxy of session id for a normalized allow list.
func newSession(p *Proxy, id string, policy berth.NetworkPolicy, entries []berth.NetworkEntry, hooks Hooks) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Session{
		p: p, opts: p.opts, id: id, ask: policy.Ask, hooks: hooks,
		log:   p.opts.Logger.With("session", id),
		slots: make(chan struct{}, p.opts.MaxConns),
		ctx:   ctx, cancel: cancel, done: make(chan struct{}),
		entries: entries, allow: slices.Clone(policy.Allow),
		denied: map[target]time.Time{}, rejected: map[target]time.Time{},
		asking: map[target]*question{}, tunnels: map[net.Conn]struct{}{},
	}
	s.transport = s.newTransport()
	s.rp = s.newReverseProxy()
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       p.opts.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	return s
}

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Policy returns the session's policy as it is now: its allow list with
// the entries AllowSession answers added.
func (s *Session) Policy() berth.NetworkPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: slices.Clone(s.allow), Ask: s.ask}
}

// Serve serves the proxy on ln until Close; it returns nil then. It may
// serve several listeners at once. At most twice Options.MaxConns
// connections are open on ln at a time; more wait to be accepted.
func (s *Session) Serve(ln net.Listener) error {
	err := s.srv.Serve(netutil.LimitListener(ln, 2*s.opts.MaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the proxy: its listeners, connections, tunnels and
// questions end, and Close returns once every handler has (a second
// Close waits for the first).
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	defer close(s.done)
	s.closed = true
	tunnels := make([]net.Conn, 0, len(s.tunnels))
	for c := range s.tunnels {
		tunnels = append(tunnels, c)
	}
	s.mu.Unlock()
	s.cancel()
	err := s.srv.Close()
	for _, c := range tunnels {
		c.Close()
	}
	s.wg.Wait()
	s.transport.CloseIdleConnections()
	s.p.forget(s)
	return err
}

// ServeHTTP serves one proxy request: CONNECT host:port, or a request
// for an absolute http:// URL. Anything else is 400.
func (s *Session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		http.Error(w, "berth egress: this session's proxy is closed", http.StatusServiceUnavailable)
		return
	}
	defer s.wg.Done()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		http.Error(w, "berth egress: too many connections in flight for this session", http.StatusServiceUnavailable)
		return
	}
	// The request ends with the client's connection or with Close.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	r = r.WithContext(ctx)
	switch {
	case r.Method == http.MethodConnect:
		s.connect(w, r)
	case r.URL.IsAbs():
		s.forward(w, r)
	default:
		http.Error(w, "berth egress: this is a proxy: ask it for CONNECT host:port or an absolute http:// URL", http.StatusBadRequest)
	}
}

// enter counts a handler in, unless the session is closed.
func (s *Session) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// track registers the ends of a tunnel for Close; false once closed.
func (s *Session) track(conns ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	for _, c := range conns {
		s.tunnels[c] = struct{}{}
	}
	return true
}

// untrack forgets the ends of a finished tunnel.
func (s *Session) untrack(conns ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range conns {
		delete(s.tunnels, c)
	}
}
