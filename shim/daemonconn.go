package shim

// The daemon connection: one attached daemon at a time, the hello that
// tells it where the stream stands, the spooled stdout sent to it, and the
// frames it sends (stdin, signals, stops, acks).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/rawsock"
)

// conn is one attached daemon.
type conn struct {
	nc     *rawsock.Conn
	wmu    sync.Mutex
	closed bool // guarded by server.mu
}

// send writes one frame.
func (c *conn) send(typ byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = typ
	hdr[1], hdr[2], hdr[3], hdr[4] = byte(len(payload)>>24), byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.nc.WriteBuffers(hdr[:], payload)
	return err
}

// accept serves daemons, one at a time: a newer connection replaces the
// one before it.
func (s *server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go s.serveConn(nc)
	}
}

// serveConn serves one daemon connection.
func (s *server) serveConn(nc *rawsock.Conn) {
	defer s.wg.Done()
	// A daemon sends small frames; a large payload is read past the
	// buffer, straight into its own slice (readFrameInto).
	r := bufio.NewReaderSize(nc, 4<<10)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, payload, err := readFrame(r)
	var req attachRequest
	if err != nil || typ != frameAttach || json.Unmarshal(payload, &req) != nil {
		_ = nc.Close()
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	c := &conn{nc: nc}
	// What the daemon has is dropped before the hello describes the rest.
	s.punch(req.From)

	s.mu.Lock()
	if s.cur != nil {
		s.closeConnLocked(s.cur)
	}
	// The newest attach wins: one that began after this one replaces it.
	s.attaches++
	attach := s.attaches
	from := min(max(req.From, s.start), s.end)
	hello := s.helloLocked(from)
	s.mu.Unlock()
	// Request lines go in as they are: HTML escaping would grow them 6×.
	var hbuf bytes.Buffer
	enc := json.NewEncoder(&hbuf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(hello)
	if c.send(frameHello, hbuf.Bytes()) != nil {
		_ = nc.Close()
		return
	}
	s.mu.Lock()
	if s.quitting() || s.attaches != attach {
		// Quitting, or a newer attach began while the hello went out: it
		// is the one that stays (this one may have been slow to get here,
		// and must not close it).
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	if s.cur != nil {
		// An older attach that got here first.
		s.closeConnLocked(s.cur)
	}
	s.cur = c
	s.detachedAt = time.Time{}
	s.noteAttachLocked()
	kept := s.stderr
	s.stderr = nil
	s.mu.Unlock()
	if len(kept) > 0 {
		_ = c.send(frameStderr, kept)
	}

	s.wg.Add(1)
	go s.sendStream(c, from)
	s.readDaemon(c, r)
	s.mu.Lock()
	s.closeConnLocked(c)
	s.mu.Unlock()
}

// quitting reports whether Serve is returning.
func (s *server) quitting() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// closeConnLocked drops a daemon connection.
func (s *server) closeConnLocked(c *conn) {
	if !c.closed {
		c.closed = true
		_ = c.nc.Close()
	}
	if s.cur == c {
		s.cur = nil
		s.detachedAt = time.Now()
		s.noteAttachLocked()
	}
	s.cond.Broadcast()
}

// helloLocked describes the shim to a daemon attaching from offset from.
func (s *server) helloLocked(from int64) Hello {
	h := Hello{SessionID: s.cfg.SessionID, ShimPID: os.Getpid(), AgentPID: s.proc.Pid(), From: from, End: s.end,
		Exited: s.exited, OutputKept: s.win.keptBefore(from), OutputTruncated: s.win.truncatedBefore(from)}
	if r, ok := s.sb.(core.SandboxRef); ok {
		h.Ref = r.Ref()
	}
	s.ledger.fill(&h)
	return h
}

// sendStream sends the spooled stdout from offset pos, then the exit.
func (s *server) sendStream(c *conn, pos int64) {
	defer s.wg.Done()
	// Made for what there is to send, at most 64 KiB: an attach with
	// nothing to replay, as an idle session's, pages in nothing for it.
	var buf []byte
	exitSent := false
	for {
		s.mu.Lock()
		for !c.closed && pos >= s.end && (exitSent || !s.drainedLocked()) {
			s.cond.Wait()
		}
		if c.closed {
			s.mu.Unlock()
			return
		}
		end, st := s.end, s.exited
		s.mu.Unlock()
		if pos < end {
			if want := min(end-pos, 64<<10); int64(len(buf)) < want {
				buf = make([]byte, max(want, 4<<10))
			}
			n, err := s.spool.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos-s.cfg.Base)
			if n == 0 && err != nil {
				s.log.Error("spool read failed", "err", err)
			}
			if n == 0 || c.send(frameStdout, buf[:n]) != nil {
				s.dropConn(c)
				return
			}
			pos += int64(n)
			continue
		}
		b, _ := json.Marshal(st)
		if c.send(frameExit, b) != nil {
			s.dropConn(c)
			return
		}
		exitSent = true
	}
}

// dropConn closes a connection that failed.
func (s *server) dropConn(c *conn) {
	s.mu.Lock()
	s.closeConnLocked(c)
	s.mu.Unlock()
}

// readDaemon serves what the daemon sends until it goes.
func (s *server) readDaemon(c *conn, r *bufio.Reader) {
	for {
		typ, payload, err := readFrame(r)
		if err != nil {
			return
		}
		switch typ {
		case frameStdin:
			s.noteStdin(payload)
			s.queueStdin(payload)
		case frameCloseStdin:
			s.queueStdin(nil)
		case frameSignal:
			var req signalRequest
			if json.Unmarshal(payload, &req) == nil && req.Signal > 0 {
				_ = s.proc.Signal(syscall.Signal(req.Signal))
			}
		case frameStop:
			var req stopRequest
			if json.Unmarshal(payload, &req) == nil {
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					_, _ = s.proc.Stop(context.Background(), time.Duration(req.GraceMillis)*time.Millisecond)
				}()
			}
		case frameAck:
			var req ackRequest
			if json.Unmarshal(payload, &req) == nil {
				s.punch(req.Offset)
			}
		case frameExitAck:
			s.mu.Lock()
			exited := s.exited != nil
			s.mu.Unlock()
			if exited {
				s.exit()
				return
			}
		}
	}
}
