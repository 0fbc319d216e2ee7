package session

import (
	"net"
	"sync"
)

// trackedListener is a listener that can close every connection it
// accepted: a tools socket's HTTP server forgets the connections its
// handler takes over (the MCP stream, for the agent's whole life), and
// a revoke must end them with the rest.
type trackedListener struct {
	net.Listener

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

// trackConns returns ln with its connections tracked.
func trackConns(ln net.Listener) *trackedListener {
	return &trackedListener{Listener: ln, conns: map[*trackedConn]struct{}{}}
}

// Accept implements net.Listener.
func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	l.conns[tc] = struct{}{}
	return tc, nil
}

// closeAll closes every connection open, and any accepted from now on.
func (l *trackedListener) closeAll() {
	l.mu.Lock()
	conns := l.conns
	l.conns, l.closed = nil, true
	l.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

// trackedConn is a connection its listener can close.
type trackedConn struct {
	net.Conn
	l *trackedListener
}

// Close implements net.Conn, and forgets the connection.
func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
