package docker

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/moby/moby/client"
)

// stdinWriter writes a process's stdin straight onto the exec's stream.
// Close half-closes the stream, which the engine turns into EOF on the
// process's stdin.
type stdinWriter struct {
	conn client.HijackedResponse
	once sync.Once
}

// Write writes b to the process's stdin.
func (w *stdinWriter) Write(b []byte) (int, error) { return w.conn.Conn.Write(b) }

// SetWriteDeadline bounds writes, so a process that stops reading cannot
// block a writer forever.
func (w *stdinWriter) SetWriteDeadline(t time.Time) error { return w.conn.Conn.SetWriteDeadline(t) }

// Close closes the process's stdin; closing twice is not an error.
func (w *stdinWriter) Close() error {
	var err error
	w.once.Do(func() {
		if err = w.conn.CloseWrite(); isClosedConn(err) {
			err = nil
		}
	})
	return err
}

// outWriter is where one demultiplexed output stream goes. After a write
// fails it discards, so that the stream keeps flowing (and the process
// does not block) when a reader has gone; the failure of a caller's writer
// is kept for Wait, that of our own pipe (its reader closed it) is not.
type outWriter struct {
	w   io.Writer
	own bool
	err error
}

// Write writes b, or discards it after a failure or without a writer.
func (o *outWriter) Write(b []byte) (int, error) {
	if o.w == nil || o.err != nil {
		return len(b), nil
	}
	if _, err := o.w.Write(b); err != nil {
		if o.own {
			o.w = nil
		} else {
			o.err = err
		}
	}
	return len(b), nil
}

// limitWriter keeps the first n bytes written and discards the rest.
type limitWriter struct {
	w io.Writer
	n int
}

// Write keeps what fits under the limit.
func (l *limitWriter) Write(b []byte) (int, error) {
	keep := min(len(b), l.n)
	if keep > 0 {
		_, _ = l.w.Write(b[:keep])
		l.n -= keep
	}
	return len(b), nil
}

// closeQuietly closes f when it is not nil.
func closeQuietly(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

// isClosedConn reports an error that only says the connection was closed.
func isClosedConn(err error) bool {
	return err != nil && (errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe))
}
