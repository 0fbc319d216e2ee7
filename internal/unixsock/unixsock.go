// Package unixsock is Unix stream sockets without package net: a listener,
// a dialer and connections built on *os.File, whose reads, writes and
// deadlines go through the runtime's poller as net's do.
//
// The shim links it instead of net. A plain `go build` of berth enters the
// shim from an init function (cmd/berth/internal/shimentry) before the
// heavy libraries the daemon links are initialised; Go initialises a
// package only once everything it imports is, and net waits for a
// vendored package that sorts last, so a shim that imported net would
// start only after all of them (their regular expressions and tables
// stay in each shim's heap for its whole life).
package unixsock

import (
	"context"
	"errors"
	"io"
	"os"
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
// calls as the socket takes (writev), under the write deadline.
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
	fd, err := socketAt(path, "dial", unix.Connect)
	if err != nil {
		return nil, err
	}
	return newConn(fd, path)
}

// socketAt makes a non-blocking, close-on-exec Unix stream socket and
// connects or binds it (do) to path; op names do in the error.
func socketAt(path, op string, do func(int, unix.Sockaddr) error) (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	// A Unix socket connects at once or not at all (EAGAIN: backlog full);
	// it binds at once too.
	if err := do(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		_ = unix.Close(fd)
		return -1, &os.PathError{Op: op, Path: path, Err: err}
	}
	return fd, nil
}

// Listener is a listening Unix stream socket. Close removes its file.
type Listener struct {
	f      *os.File
	path   string
	close  sync.Once
	closed atomic.Bool
	err    error
}

// Listen listens on a new socket file at path (which must not exist),
// with the system's largest backlog.
func Listen(path string) (*Listener, error) {
	fd, err := socketAt(path, "bind", unix.Bind)
	if err != nil {
		return nil, err
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		_ = unix.Close(fd)
		_ = os.Remove(path)
		return nil, &os.PathError{Op: "listen", Path: path, Err: err}
	}
	return &Listener{f: os.NewFile(uintptr(fd), path), path: path}, nil
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
			return nil, &os.PathError{Op: "accept", Path: l.path, Err: os.ErrClosed}
		}
		return nil, err
	}
	if aerr != nil {
		return nil, os.NewSyscallError("accept4", aerr)
	}
	return &Conn{os.NewFile(uintptr(nfd), l.path)}, nil
}

// Close stops the listener, wakes a waiting Accept and removes the
// socket file. Later calls return the first's error.
func (l *Listener) Close() error {
	l.close.Do(func() {
		l.closed.Store(true)
		_ = os.Remove(l.path)
		l.err = l.f.Close()
	})
	return l.err
}

var _ io.ReadWriteCloser = (*Conn)(nil)
