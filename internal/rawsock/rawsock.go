// Package rawsock is stream sockets without package net — Unix sockets
// (a listener, a dialer, socket pairs) and a listener on an IPv4 address —
// with connections built on *os.File, whose reads, writes and deadlines
// go through the runtime's poller as net's do.
//
// The programs berth runs beside each agent (the shim, the gateway relay)
// link it instead of net. A plain `go build` of berth enters them from an
// init function (cmd/berth/internal/childentry) before the heavy libraries
// the daemon links are initialised; Go initialises a package only once
// everything it imports is, and net waits for a vendored package that
// sorts last, so one that imported net would start only after all of them
// (their regular expressions and tables stay in its heap for its life).
package rawsock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is a connected Unix stream socket. Read, Write, Close and the
// deadlines are *os.File's; a Read or Write blocked when Close is called
// returns os.ErrClosed.
type Conn struct {
	*os.File
}

// newConn makes a Conn of a socket descriptor it now owns, non-blocking so
// that the runtime's poller serves it.
func newConn(fd int, name string) (*Conn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	return &Conn{os.NewFile(uintptr(fd), name)}, nil
}

// FileConn makes a Conn of the socket f holds, which stays f's to close:
// the Conn has a close-on-exec duplicate.
func FileConn(f *os.File) (*Conn, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var derr error
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, os.NewSyscallError("dup", derr)
	}
	return newConn(nfd, f.Name())
}

// Pair makes a connected pair of sockets: ours as a Conn, theirs as a
// blocking file for a child process to inherit. Both are close-on-exec.
func Pair(name string) (ours *Conn, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	theirs = os.NewFile(uintptr(fds[1]), name)
	ours, err = newConn(fds[0], name)
	if err != nil {
		_ = theirs.Close()
		return nil, nil, err
	}
	return ours, theirs, nil
}

// WriteBuffers writes every byte of bufs, in order, with as few system
// calls as the socket takes (writev), under the write deadline. It
// consumes bufs (as net.Buffers does).
func (c *Conn) WriteBuffers(bufs ...[]byte) (int64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var total int64
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := unix.Writev(int(fd), bufs)
			if n > 0 {
				total += int64(n)
				bufs = consume(bufs, n)
			}
			if err == unix.EAGAIN {
				return false
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				werr = os.NewSyscallError("writev", err)
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	return total, err
}

// consume drops the first n bytes of bufs.
func consume(bufs [][]byte, n int) [][]byte {
	for n > 0 && len(bufs) > 0 {
		if n < len(bufs[0]) {
			bufs[0] = bufs[0][n:]
			return bufs
		}
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	// Empty buffers left at the front would make writev write nothing.
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}

// Dial connects to the socket at path. A listener whose backlog is full
// is tried again every millisecond until ctx ends.
func Dial(ctx context.Context, path string) (*Conn, error) {
	for {
		c, err := dialOnce(path)
		if !errors.Is(err, unix.EAGAIN) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, &os.PathError{Op: "dial", Path: path, Err: ctx.Err()}
		case <-time.After(time.Millisecond):
		}
	}
}

// dialOnce connects once; EAGAIN when the listener's backlog is full.
func dialOnce(path string) (*Conn, error) {
	// A Unix socket connects at once or not at all (EAGAIN: backlog full).
	fd, err := socketAt(unix.AF_UNIX, &unix.SockaddrUnix{Name: path}, path, "dial", unix.Connect)
	if err != nil {
		return nil, err
	}
	return &Conn{os.NewFile(uintptr(fd), path)}, nil
}

// socketAt makes a non-blocking, close-on-exec stream socket of domain
// and connects or binds it (do) to sa; name and op go in the error.
func socketAt(domain int, sa unix.Sockaddr, name, op string, do func(int, unix.Sockaddr) error) (int, error) {
	fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	if domain == unix.AF_INET {
		// As net does: a port left in TIME_WAIT by the last relay is taken again.
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}
	if err := do(fd, sa); err != nil {
		_ = unix.Close(fd)
		return -1, &os.PathError{Op: op, Path: name, Err: err}
	}
	return fd, nil
}

// Listener is a listening stream socket. Closing a Unix one removes its
// file.
type Listener struct {
	f      *os.File
	path   string // the Unix socket's file; "" for TCP
	close  sync.Once
	closed atomic.Bool
	err    error
}

// Listen listens on a new socket file at path (which must not exist),
// with the system's largest backlog.
func Listen(path string) (*Listener, error) {
	return listenOn(unix.AF_UNIX, &unix.SockaddrUnix{Name: path}, path, path)
}

// ListenTCP4 listens on addr, an IPv4 address and port ("127.0.0.1:41400";
// port 0 picks one, see Port). Names and IPv6 are refused: resolving them
// is net's.
func ListenTCP4(addr string) (*Listener, error) {
	sa, err := parseIPv4Port(addr)
	if err != nil {
		return nil, err
	}
	return listenOn(unix.AF_INET, sa, addr, "")
}

// listenOn binds a socket of domain to sa and listens with the system's
// largest backlog; path is the socket file a Unix one made ("" for TCP).
func listenOn(domain int, sa unix.Sockaddr, name, path string) (*Listener, error) {
	fd, err := socketAt(domain, sa, name, "bind", unix.Bind)
	if err != nil {
		return nil, err
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		_ = unix.Close(fd)
		if path != "" {
			_ = os.Remove(path)
		}
		return nil, &os.PathError{Op: "listen", Path: name, Err: err}
	}
	return &Listener{f: os.NewFile(uintptr(fd), name), path: path}, nil
}

// parseIPv4Port parses "a.b.c.d:port".
func parseIPv4Port(addr string) (*unix.SockaddrInet4, error) {
	bad := fmt.Errorf("listen tcp %q: want an IPv4 address and a port", addr)
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return nil, bad
	}
	sa := &unix.SockaddrInet4{}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, bad
	}
	sa.Port = int(p)
	parts := strings.Split(host, ".")
	if len(parts) != 4 {
		return nil, bad
	}
	for i, part := range parts {
		b, err := strconv.ParseUint(part, 10, 8)
		if err != nil || len(part) > 1 && part[0] == '0' {
			return nil, bad
		}
		sa.Addr[i] = byte(b)
	}
	return sa, nil
}

// Port is the port a TCP listener listens on (0 for a Unix one).
func (l *Listener) Port() int {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return 0
	}
	var port int
	_ = rc.Control(func(fd uintptr) {
		if sa, err := unix.Getsockname(int(fd)); err == nil {
			if in4, ok := sa.(*unix.SockaddrInet4); ok {
				port = in4.Port
			}
		}
	})
	return port
}

// Accept waits for the next connection. After Close it returns an error
// satisfying errors.Is(err, os.ErrClosed).
func (l *Listener) Accept() (*Conn, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var aerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			nfd, _, aerr = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
			switch aerr {
			case unix.EINTR, unix.ECONNABORTED:
				continue
			case unix.EAGAIN:
				return false
			}
			return true
		}
	})
	if err != nil {
		if l.closed.Load() {
			// The poller's own "use of closed file" is not os.ErrClosed.
			return nil, &os.PathError{Op: "accept", Path: l.f.Name(), Err: os.ErrClosed}
		}
		return nil, err
	}
	if aerr != nil {
		return nil, os.NewSyscallError("accept4", aerr)
	}
	return &Conn{os.NewFile(uintptr(nfd), l.f.Name())}, nil
}

// Close stops the listener, wakes a waiting Accept and removes a Unix
// socket's file. Later calls return the first's error.
func (l *Listener) Close() error {
	l.close.Do(func() {
		l.closed.Store(true)
		if l.path != "" {
			_ = os.Remove(l.path)
		}
		l.err = l.f.Close()
	})
	return l.err
}

var _ io.ReadWriteCloser = (*Conn)(nil)
