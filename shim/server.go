package shim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// DefaultLinger is how long a shim whose agent has exited waits for a
// daemon to collect the exit status before it gives up and exits.
const DefaultLinger = 15 * time.Minute

// drainWait is how long, once the agent has exited, the shim waits for its
// stdout to reach EOF (a child the agent left may hold the pipe) before it
// reports the exit anyway.
const drainWait = 2 * time.Second

// stdinQueue bounds the frames waiting for an agent that does not read
// its stdin; past it the daemon's connection waits (back-pressure).
const stdinQueue = 1024

// stderrKeep caps the stderr kept while no daemon is attached.
const stderrKeep = 64 << 10

// maxTracked caps the length of a line the shim keeps whole to learn
// whether it is a request; longer lines are spooled but not tracked.
const maxTracked = 64 << 20

// Command is the agent's program.
type Command struct {
	Path string   `json:"path"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
}

// Config is one shim's job.
type Config struct {
	SessionID string `json:"session_id"`
	// Bundle names the shim's files in the run directory.
	Bundle
	// Sandbox is what the provider needs to open the session's sandbox.
	Sandbox berth.SandboxConfig `json:"sandbox"`
	Command Command             `json:"command"`
	// Linger bounds the wait for a daemon after the agent exited
	// (DefaultLinger when zero).
	Linger time.Duration `json:"linger,omitempty"`
	// Orphan bounds how long the shim keeps a live agent with no daemon
	// attached (DefaultOrphan when zero): past it nothing will reattach,
	// so the agent is stopped and the shim exits.
	Orphan time.Duration `json:"orphan,omitempty"`
	// Provider names the sandbox provider the shim opens the sandbox with.
	Provider string `json:"provider"`
	// Base is the stream offset of the agent's first stdout byte: offsets
	// keep growing across the agents one session runs, so a daemon's
	// record of how far it got never goes back.
	Base int64 `json:"base,omitempty"`
}

// Ready is the line a shim writes on its stdout once it serves, or why it
// cannot.
type Ready struct {
	ShimPID  int    `json:"shim_pid"`
	AgentPID int    `json:"agent_pid"`
	Ref      string `json:"ref,omitempty"`
	// Stage says what failed: "sandbox" (opening it) or "start" (the agent).
	Stage string `json:"stage,omitempty"`
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// server is one running shim.
type server struct {
	cfg   Config
	log   *slog.Logger
	proc  berth.Process
	sb    berth.Sandbox
	spool *os.File
	ln    net.Listener

	stdinMu sync.Mutex

	mu   sync.Mutex
	cond *sync.Cond
	// start is the spool offset before which bytes were dropped; end how
	// much stdout was spooled.
	start, end int64
	outEOF     bool
	exited     *berth.ExitStatus
	exitAt     time.Time
	// requests and calls are the unanswered requests both ways, by id.
	requests map[string]Request
	calls    map[string]*Call
	// stdin queues frames for the agent's stdin writer.
	stdin  chan []byte
	lastID int64
	stderr []byte
	cur    *conn
	// detachedAt is when the last daemon left (or the shim started);
	// zero while one is attached.
	detachedAt time.Time
	quit       chan struct{}
	quitOnce   sync.Once

	wg sync.WaitGroup
}

// conn is one attached daemon.
type conn struct {
	nc     net.Conn
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
	bufs := net.Buffers{hdr[:], payload}
	_, err := bufs.WriteTo(c.nc)
	return err
}

// Serve runs a shim until its agent has exited and a daemon has its exit
// status (or the linger is over). It writes one Ready line to ready once
// the agent runs and the socket listens, or says why not. ctx ending
// (SIGTERM to the shim) stops the agent.
func Serve(ctx context.Context, provider berth.SandboxProvider, cfg Config, ready io.Writer, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Orphan <= 0 {
		cfg.Orphan = DefaultOrphan
	}
	s := &server{cfg: cfg, log: logger, requests: map[string]Request{}, calls: map[string]*Call{}, quit: make(chan struct{}),
		start: cfg.Base, end: cfg.Base, detachedAt: time.Now()}
	s.cond = sync.NewCond(&s.mu)
	if stage, err := s.open(ctx, provider); err != nil {
		_ = json.NewEncoder(ready).Encode(Ready{ShimPID: os.Getpid(), Stage: stage, Code: berth.ErrorCode(err), Error: berth.ErrorMessage(err)})
		return err
	}
	rd := Ready{ShimPID: os.Getpid(), AgentPID: s.proc.Pid()}
	if r, ok := s.sb.(berth.SandboxRef); ok {
		rd.Ref = r.Ref()
	}
	if err := json.NewEncoder(ready).Encode(rd); err != nil {
		logger.Warn("ready line not written", "err", err)
	}

	s.stdin = make(chan []byte, stdinQueue)
	s.wg.Add(6)
	go s.watch()
	go s.writeStdin(s.stdin)
	go s.pumpStdout()
	go s.pumpStderr()
	go s.waitAgent()
	go s.accept()

	stopped := false
	for {
		select {
		case <-s.quit:
			s.shutdown()
			return nil
		case <-ctx.Done():
			// Told to go: the agent stops, and nobody is waited for.
			if !stopped {
				stopped = true
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					_, _ = s.proc.Stop(context.Background(), 5*time.Second)
					s.exit()
				}()
			}
			ctx = context.Background()
		}
	}
}

// open starts the agent in its sandbox, the spool and the socket. It
// returns which stage failed.
func (s *server) open(ctx context.Context, provider berth.SandboxProvider) (string, error) {
	spool, ln, err := s.cfg.Bundle.create()
	if err != nil {
		return "shim", err
	}
	fail := func() {
		_ = ln.Close()
		_ = spool.Close()
		s.cfg.Bundle.removeServed()
	}
	sb, err := provider.Open(ctx, s.cfg.Sandbox)
	if err != nil {
		fail()
		return "sandbox", err
	}
	c := s.cfg.Command
	proc, err := sb.Start(ctx, berth.ProcSpec{Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir})
	if err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		fail()
		return "start", err
	}
	s.spool, s.ln, s.sb, s.proc = spool, ln, sb, proc
	return "", nil
}

// shutdown closes everything and waits for every goroutine.
func (s *server) shutdown() {
	_ = s.ln.Close()
	s.mu.Lock()
	if s.cur != nil {
		s.closeConnLocked(s.cur)
	}
	s.mu.Unlock()
	// A stop still running, or an agent that never exited (linger after a
	// lost stdout), ends now.
	_, _ = s.proc.Stop(context.Background(), time.Second)
	// A process the agent left may hold its stdout or stderr open (or its
	// stdin full, with the writer blocked on it).
	_ = s.proc.Stdin().Close()
	_ = s.proc.Stdout().Close()
	_ = s.proc.Stderr().Close()
	s.wg.Wait()
	_ = s.spool.Close()
	s.cfg.Bundle.removeServed()
}

// pumpStdout spools the agent's stdout and learns the requests in it.
func (s *server) pumpStdout() {
	defer s.wg.Done()
	out := s.proc.Stdout()
	buf := make([]byte, 256<<10)
	var partial []byte
	skipping := false
	end := s.cfg.Base
	for {
		n, err := out.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if _, werr := s.spool.WriteAt(chunk, end-s.cfg.Base); werr != nil {
				s.log.Error("spool write failed", "err", werr)
			}
			base := end
			end += int64(n)
			var seen []lineInfo
			for i := 0; i < len(chunk); {
				j := bytes.IndexByte(chunk[i:], '\n')
				if j < 0 {
					if !skipping {
						if len(partial)+len(chunk)-i > maxTracked {
							skipping, partial = true, nil
						} else {
							partial = append(partial, chunk[i:]...)
						}
					}
					break
				}
				line := chunk[i : i+j]
				if len(partial) > 0 {
					line = append(partial, line...)
				}
				if !skipping {
					if li, ok := classify(line, base+int64(i+j+1)); ok {
						seen = append(seen, li)
					}
				}
				partial, skipping = partial[:0], false
				i += j + 1
			}
			s.mu.Lock()
			s.end = end
			for _, li := range seen {
				switch li.kind {
				case acp.KindRequest:
					s.requests[li.id] = Request{End: li.end, Line: li.line}
				case acp.KindResponse:
					// Kept until a daemon has the answer durably (see prune).
					if c := s.calls[li.id]; c != nil {
						c.AnsweredAt = li.end
					}
				}
			}
			// The connection's sender takes it from the spool: a daemon that
			// reads slowly never holds up the agent, the spool absorbs it.
			s.cond.Broadcast()
			s.mu.Unlock()
		}
		if err != nil {
			s.mu.Lock()
			s.outEOF = true
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
	}
}

// lineInfo is what the shim keeps of a line it watched.
type lineInfo struct {
	kind acp.Kind
	id   string
	end  int64
	line json.RawMessage
}

// idKey is how a JSON-RPC id member begins on the wire.
var idKey = []byte(`"id"`)

// classify reads a stdout line; requests keep a copy of their line. A
// line without "id" anywhere is a notification (the bulk of a stream) and
// is not scanned further. (An id key spelled with \u escapes is not seen.)
func classify(line []byte, end int64) (lineInfo, bool) {
	if !bytes.Contains(line, idKey) {
		return lineInfo{}, false
	}
	kind, id, _ := acp.Classify(line)
	switch kind {
	case acp.KindRequest:
		return lineInfo{kind: kind, id: string(id), end: end, line: bytes.Clone(bytes.TrimSpace(line))}, true
	case acp.KindResponse:
		return lineInfo{kind: kind, id: string(id), end: end}, true
	}
	return lineInfo{}, false
}

// pumpStderr forwards the agent's stderr to the attached daemon, keeping
// the tail while none is.
func (s *server) pumpStderr() {
	defer s.wg.Done()
	buf := make([]byte, 32<<10)
	errs := s.proc.Stderr()
	for {
		n, err := errs.Read(buf)
		if n > 0 {
			s.mu.Lock()
			c := s.cur
			if c == nil {
				s.keepStderrLocked(buf[:n])
			}
			s.mu.Unlock()
			if c != nil && c.send(frameStderr, buf[:n]) != nil {
				s.mu.Lock()
				s.keepStderrLocked(buf[:n])
				s.mu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

// keepStderrLocked appends to the kept stderr, dropping the oldest bytes.
func (s *server) keepStderrLocked(b []byte) {
	s.stderr = append(s.stderr, b...)
	if over := len(s.stderr) - stderrKeep; over > 0 {
		s.stderr = append(s.stderr[:0], s.stderr[over:]...)
	}
}

// waitAgent reaps the agent and releases its sandbox; after that the shim
// lingers until a daemon has the exit status.
func (s *server) waitAgent() {
	defer s.wg.Done()
	st, _ := s.proc.Wait()
	s.mu.Lock()
	s.exited, s.exitAt = &st, time.Now()
	s.cond.Broadcast()
	s.mu.Unlock()
	// Senders waiting for a stdout that never ends are woken to report anyway.
	drained := time.AfterFunc(drainWait, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer drained.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	if err := s.sb.Close(ctx); err != nil {
		s.log.Warn("sandbox close", "err", err)
	}
	cancel()
	select {
	case <-s.quit:
	case <-time.After(s.cfg.Linger):
		s.log.Warn("no daemon collected the exit status; the shim exits", "linger", s.cfg.Linger)
		s.exit()
	}
}

// exit makes Serve return.
func (s *server) exit() { s.quitOnce.Do(func() { close(s.quit) }) }

// drainedLocked reports whether the exit can be reported: the agent has
// exited and its stdout ended, or the drain wait is over.
func (s *server) drainedLocked() bool {
	return s.exited != nil && (s.outEOF || time.Since(s.exitAt) >= drainWait)
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
func (s *server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	r := bufio.NewReaderSize(nc, 64<<10)
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
	if s.quitting() {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	if s.cur != nil {
		// Another daemon attached meanwhile: the newest wins.
		s.closeConnLocked(s.cur)
	}
	s.cur = c
	s.detachedAt = time.Time{}
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
	}
	s.cond.Broadcast()
}

// helloLocked describes the shim to a daemon attaching from offset from.
func (s *server) helloLocked(from int64) Hello {
	h := Hello{SessionID: s.cfg.SessionID, ShimPID: os.Getpid(), AgentPID: s.proc.Pid(), From: from, End: s.end,
		Exited: s.exited, LastID: s.lastID}
	if r, ok := s.sb.(berth.SandboxRef); ok {
		h.Ref = r.Ref()
	}
	for _, r := range s.requests {
		h.Requests = append(h.Requests, r)
	}
	sort.Slice(h.Requests, func(i, j int) bool { return h.Requests[i].End < h.Requests[j].End })
	for _, c := range s.calls {
		h.Calls = append(h.Calls, *c)
	}
	sort.Slice(h.Calls, func(i, j int) bool { return string(h.Calls[i].ID) < string(h.Calls[j].ID) })
	return h
}

// sendStream sends the spooled stdout from offset pos, then the exit.
func (s *server) sendStream(c *conn, pos int64) {
	defer s.wg.Done()
	// Small: a reattach after an idle spell should not page in much.
	buf := make([]byte, 64<<10)
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

// noteStdin learns the daemon's requests and answers from lines it sends
// the agent, before the agent can see them.
func (s *server) noteStdin(payload []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for rest := payload; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		kind, id, method := acp.Classify(line)
		switch kind {
		case acp.KindRequest:
			s.calls[string(id)] = &Call{ID: bytes.Clone(id), Method: method}
			if n, err := strconv.ParseInt(string(id), 10, 64); err == nil && n > s.lastID {
				s.lastID = n
			}
		case acp.KindResponse:
			delete(s.requests, string(id))
		}
	}
}

// writeStdin writes the queued stdin frames to the agent in order, on a
// goroutine of its own: an agent that does not read its stdin holds up
// nothing but this (a stop or a signal still gets through).
func (s *server) writeStdin(in <-chan []byte) {
	defer s.wg.Done()
	for {
		var payload []byte
		select {
		case payload = <-in:
		case <-s.quit:
			return
		}
		s.stdinMu.Lock()
		var err error
		if payload == nil {
			// The daemon closed the agent's stdin, after what it sent before.
			err = s.proc.Stdin().Close()
		} else {
			_, err = s.proc.Stdin().Write(payload)
		}
		s.stdinMu.Unlock()
		if err != nil {
			s.log.Warn("agent stdin", "err", err)
		}
	}
}

// queueStdin hands a frame (nil: close stdin) to the stdin writer.
func (s *server) queueStdin(payload []byte) {
	select {
	case s.stdin <- payload:
	case <-s.quit:
	}
}

// punch frees the spool's blocks before offset, and forgets the answered
// calls before it: a daemon has durably processed everything there. The
// file keeps its size, so offsets stay valid.
func (s *server) punch(offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, c := range s.calls {
		if c.AnsweredAt > 0 && c.AnsweredAt <= offset {
			delete(s.calls, id)
		}
	}
	// Nothing past what was spooled is dropped, whatever a daemon claims.
	offset = min(offset, s.end)
	aligned := s.cfg.Base + (offset-s.cfg.Base)&^4095
	if aligned <= s.start {
		return
	}
	if err := unix.Fallocate(int(s.spool.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, aligned-s.cfg.Base); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) {
			s.log.Debug("spool punch", "err", err)
		}
		return
	}
	s.start = aligned
}
