package http

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-sh/berth"
)

// DefaultBodyTimeout is how long a request body may take to arrive unless
// ServerOptions.BodyTimeout says otherwise.
const DefaultBodyTimeout = 30 * time.Second

// DefaultWriteTimeout is how long one write to a client may take unless
// ServerOptions.WriteTimeout says otherwise: a client that reads nothing for
// that long is cut.
const DefaultWriteTimeout = 30 * time.Second

// DefaultMaxConnections caps the open TCP connections unless
// ServerOptions.MaxConnections says otherwise: well below the usual
// RLIMIT_NOFILE, leaving descriptors for the store, agents and sockets.
const DefaultMaxConnections = 512

// connInfo is what the server knows of the connection a request came on.
type connInfo struct {
	// socket is true for the Unix socket, false for TCP.
	socket bool
	// tracked is the TCP connection's entry in the limiter, nil otherwise.
	tracked *trackedConn
}

// connInfoKey keys connInfo in a request's context.
type connInfoKey struct{}

// connContext records, in every request's context, which listener the
// connection came from (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	info := &connInfo{socket: c.LocalAddr().Network() == "unix"}
	if tc, ok := c.(*trackedConn); ok {
		info.tracked = tc
	}
	return context.WithValue(ctx, connInfoKey{}, info)
}

// withSocket marks ctx as a Unix socket request: for tests that call the
// handler directly.
func withSocket(ctx context.Context) context.Context {
	return context.WithValue(ctx, connInfoKey{}, &connInfo{socket: true})
}

// fromSocket reports whether r came on the Unix socket. A request whose
// connection is unknown (a handler embedded elsewhere) counts as TCP: the
// checks apply unless we know better.
func fromSocket(r *http.Request) bool {
	info, _ := r.Context().Value(connInfoKey{}).(*connInfo)
	return info != nil && info.socket
}

// setBusy marks r's connection as doing work past its request (true) or
// back to reading one (false); only connections not busy, or whose write is
// stuck past the write timeout, are shed.
func setBusy(r *http.Request, busy bool) {
	if info, _ := r.Context().Value(connInfoKey{}).(*connInfo); info != nil && info.tracked != nil {
		info.tracked.busy.Store(busy)
	}
}

// limitListener caps the connections open at once. When a connection
// arrives and the cap is reached, the oldest connection that is not busy
// (still sending its request line, headers or body, or idle between
// requests) is closed to make room; when every one is busy, the new one is
// closed instead. So a flood of slow clients cannot keep a well-behaved
// client out, and requests being worked on (SSE streams, long polls) are
// never cut. A busy connection whose write has been blocked longer than
// writeTimeout (a client that does not read) counts as not busy: its
// handler is about to fail anyway.
type limitListener struct {
	net.Listener
	max          int
	writeTimeout time.Duration
	log          *slog.Logger

	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	seq   uint64
	shed  atomic.Int64
}

// newLimitListener wraps ln with a cap of max connections.
func newLimitListener(ln net.Listener, max int, writeTimeout time.Duration, log *slog.Logger) *limitListener {
	return &limitListener{Listener: ln, max: max, writeTimeout: writeTimeout, log: log, conns: make(map[*trackedConn]struct{})}
}

// trackedConn is a connection the limiter counts.
type trackedConn struct {
	net.Conn
	l    *limitListener
	seq  uint64
	busy atomic.Bool
	// writingSince is when the write in progress began (UnixNano), 0 when
	// none is.
	writingSince atomic.Int64
	once         sync.Once
}

// Write writes b, recording how long it has been blocked.
func (c *trackedConn) Write(b []byte) (int, error) {
	c.writingSince.Store(time.Now().UnixNano())
	defer c.writingSince.Store(0)
	return c.Conn.Write(b)
}

// sheddable reports whether c may be closed to make room: it is not busy,
// or its write has been stuck longer than the write timeout.
func (c *trackedConn) sheddable(now time.Time) bool {
	if !c.busy.Load() {
		return true
	}
	since := c.writingSince.Load()
	return since != 0 && now.Sub(time.Unix(0, since)) > c.l.writeTimeout
}

// Close closes the connection and frees its place.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.remove(c) })
	return err
}

// Accept waits for a connection and makes room for it.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *trackedConn
		if len(l.conns) >= l.max {
			now := time.Now()
			for v := range l.conns {
				if v.sheddable(now) && (victim == nil || v.seq < victim.seq) {
					victim = v
				}
			}
			if victim == nil {
				l.mu.Unlock()
				l.log.Warn("connection refused: every connection is busy", "max_connections", l.max)
				c.Close()
				continue
			}
			delete(l.conns, victim)
		}
		l.seq++
		tc := &trackedConn{Conn: c, l: l, seq: l.seq}
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		if victim != nil {
			l.shed.Add(1)
			l.log.Debug("connection shed to make room", "remote", victim.RemoteAddr().String(), "max_connections", l.max)
			victim.Close()
		}
		return tc, nil
	}
}

// remove forgets c.
func (l *limitListener) remove(c *trackedConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// open returns the number of connections counted.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// maxConnections returns the connection cap in force: the option (or
// DefaultMaxConnections), lowered to half the open-file limit so that the
// store, the agents' pipes and the socket always find a descriptor.
func (s *Server) maxConnections() int {
	n := s.opts.MaxConnections
	if n <= 0 {
		n = DefaultMaxConnections
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 0 && lim.Cur < 1<<31 && uint64(n) > lim.Cur/2 {
		s.log.Warn("server.max_connections lowered to half the open-file limit", "max_connections", n, "limit", lim.Cur/2)
		n = max(int(lim.Cur/2), 1)
	}
	return n
}

// writeTimeout returns the deadline in force for one write to a client.
func (s *Server) writeTimeout() time.Duration {
	if s.opts.WriteTimeout > 0 {
		return s.opts.WriteTimeout
	}
	return DefaultWriteTimeout
}

// bodyTimeout returns the request body deadline in force.
func (s *Server) bodyTimeout() time.Duration {
	if s.opts.BodyTimeout > 0 {
		return s.opts.BodyTimeout
	}
	return DefaultBodyTimeout
}

// bodyDeadline gives a request's body bodyTimeout to arrive, from the moment
// its headers are read: the read deadline bounds every read of it, whether
// readBody takes it or net/http discards what a refused request left. Without
// a body there is no deadline, so SSE streams and long polls are not cut.
func (s *Server) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			// Not every writer supports deadlines (tests' recorders); then
			// there is no connection to protect.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout()))
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads the whole request body (up to the cap) before the handler
// runs, then lifts the read deadline, so that a handler that answers late (a
// prompt with ?wait=true) is not cut by it. From here on a request that
// proved who it is keeps its connection busy: not shed while it is worked
// on. A public path (the UI's files, the sign-in endpoints) never does, so
// clients without a token cannot fill the cap with busy connections.
func (s *Server) readBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasBody(r) {
			limit := s.bodyLimit()
			raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
					w.Header().Set("Connection", "close")
					s.writeErrorStatus(w, r, berth.WrapError(berth.EInvalid, err,
						"the request body did not arrive within %s", s.bodyTimeout()), http.StatusRequestTimeout)
					return
				}
				w.Header().Set("Connection", "close")
				s.writeError(w, r, decodeError(err, limit))
				return
			}
			// net/http lifts it too when it sees the body's end; lifting it
			// here keeps that true whatever the body's framing.
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
			r.Body = io.NopCloser(bytes.NewReader(raw))
		}
		if via := authOf(r); via == viaToken || via == viaCookie || via == viaSocket || via == viaNode || !publicPath(r) {
			setBusy(r, true)
			defer setBusy(r, false)
		}
		next.ServeHTTP(w, r)
	})
}
