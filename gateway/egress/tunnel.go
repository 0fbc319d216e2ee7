package egress

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// connect serves CONNECT host:port: admitted and dialed, it answers 200
// and carries bytes both ways until both sides are done.
func (s *Session) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		http.Error(w, "berth egress: CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	h, n, ok := s.admitTarget(w, r, host, port)
	if !ok {
		return
	}
	up, err := s.dial(r.Context(), h, n)
	if err != nil {
		s.refuse(w, err)
		return
	}
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		s.refuse(w, refused(http.StatusInternalServerError, "this connection cannot carry a tunnel"))
		return
	}
	if !s.track(client, up) {
		client.Close()
		up.Close()
		return
	}
	defer s.untrack(client, up)
	t := &tunnel{idle: s.opts.IdleTimeout}
	t.touch()
	client.SetWriteDeadline(time.Now().Add(t.idle))
	_, err = io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n")
	// Bytes the client sent after its request (a TLS hello) go first.
	if n := brw.Reader.Buffered(); err == nil && n > 0 {
		b, _ := brw.Reader.Peek(n)
		up.SetWriteDeadline(time.Now().Add(t.idle))
		_, err = up.Write(b)
	}
	if err != nil {
		client.Close()
		up.Close()
		return
	}
	t.run(client, up)
}

// tunnel carries bytes both ways between two connections, ending when
// both directions reached EOF, either failed, or none moved a byte for
// idle.
type tunnel struct {
	idle time.Duration
	// last is when a byte last moved either way (Unix nanoseconds).
	last atomic.Int64
}

// touch records that a byte moved.
func (t *tunnel) touch() { t.last.Store(time.Now().UnixNano()) }

// quiet reports whether no byte moved either way for idle.
func (t *tunnel) quiet() bool { return time.Since(time.Unix(0, t.last.Load())) >= t.idle }

// run carries both ways until done, then closes both connections. A
// direction that reaches EOF half-closes its destination; an error, or a
// destination that cannot half-close, ends both.
func (t *tunnel) run(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		if err := t.pipe(dst, src); errors.Is(err, io.EOF) && closeWrite(dst) == nil {
			return
		}
		a.Close()
		b.Close()
	}
	wg.Add(2)
	go half(b, a)
	go half(a, b)
	wg.Wait()
	a.Close()
	b.Close()
}

// pipe copies src to dst until src's EOF (io.EOF), an error, or idle.
func (t *tunnel) pipe(dst, src net.Conn) error {
	buf := make([]byte, 32<<10)
	for {
		src.SetReadDeadline(time.Now().Add(t.idle))
		n, err := src.Read(buf)
		if n > 0 {
			t.touch()
			dst.SetWriteDeadline(time.Now().Add(t.idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded) && !t.quiet():
			// Quiet this way, busy the other: keep waiting.
		default:
			return err
		}
	}
}

// closeWrite half-closes c, if it can.
func closeWrite(c net.Conn) error {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
