package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/internal/core"
	"github.com/berth-sh/berth/internal/optx"
	"github.com/berth-sh/berth/internal/rawsock"
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
	Sandbox core.SandboxConfig `json:"sandbox"`
	Command Command            `json:"command"`
	// Linger bounds the wait for a daemon after the agent exited
	// (DefaultLinger when zero).
	Linger time.Duration `json:"linger,omitempty"`
	// Orphan bounds how long the shim keeps a live agent with no daemon
	// attached (DefaultOrphan when zero): past it nothing will reattach,
	// so the agent is stopped and the shim exits.
	Orphan time.Duration `json:"orphan,omitempty"`
	// Look, when set, is how often a shim with no daemon attached looks
	// for its run directory and its orphan timeout, in place of watchEvery
	// (tests; the daemon leaves it unset).
	Look time.Duration `json:"-"`
	// Provider names the sandbox provider the shim opens the sandbox with.
	Provider string `json:"provider"`
	// Base is the stream offset of the agent's first stdout byte: offsets
	// keep growing across the agents one session runs, so a daemon's
	// record of how far it got never goes back.
	Base int64 `json:"base,omitempty"`
	// MaxLineBytes caps one stdout line, its newline included
	// (acp.DefaultMaxLineBytes when zero): a longer line is never spooled,
	// and the daemon is told its length (see Report).
	MaxLineBytes int `json:"max_line_bytes,omitempty"`
	// MaxTurnOutput caps the agent's output the spool keeps per turn, and
	// between two turns (see window); zero keeps everything.
	MaxTurnOutput int64 `json:"max_turn_output,omitempty"`
	// Token signs the shim's reports (see Report): a secret of the
	// daemon's, never the agent's.
	Token string `json:"token,omitempty"`
	// Opened, when set, is called once the agent is started or could not
	// be, before the ready line: the shim program sends its stderr to the
	// session's log there, the log file's making off the agent's start.
	Opened func() `json:"-"`
	// Input is written to the agent's stdin as it starts, before anything
	// a daemon sends: the daemon's first request (initialize), read by
	// the agent as soon as its own start is done rather than a hop after
	// the ready line.
	Input []byte `json:"input,omitempty"`
	// Then is written to the agent's stdin once its stdout has carried a
	// successful answer to Input's request: the request the daemon would
	// send on that answer (session/new after initialize), sent without
	// the hop to the daemon and back. Nothing is written when the answer
	// is an error, or never comes.
	Then []byte `json:"then,omitempty"`
	// Attached, when set, is a connection the daemon made before the job
	// came (see EnvConn): served as its first attach once the agent runs,
	// so that no dial waits for the socket. Serve closes it if it fails.
	Attached *rawsock.Conn `json:"-"`
}

// maxLine is the line cap in force.
func (c *Config) maxLine() int64 {
	if c.MaxLineBytes <= 0 {
		return acp.DefaultMaxLineBytes
	}
	return int64(c.MaxLineBytes)
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

// server is one running shim. It does four jobs, a file each: the agent
// and its stdin and stderr (this file), the spool of its stdout
// (spool.go), the ledger of requests in flight (ledger.go), and the
// daemon connection (daemonconn.go). Their state is shared under mu: the
// spool's offsets (start, end, outEOF) and the agent's exit wake the
// daemon connection's sender through cond, and the ledger is read for the
// hello with the offsets it goes with.
type server struct {
	cfg   Config
	log   *slog.Logger
	proc  core.Process
	sb    core.Sandbox
	spool *os.File
	ln    *rawsock.Listener

	mu   sync.Mutex
	cond *sync.Cond
	// start is the spool offset before which bytes were dropped; end how
	// much stdout was spooled.
	start, end int64
	outEOF     bool
	exited     *core.ExitStatus
	exitAt     time.Time
	// ledger is the requests in flight both ways.
	ledger *ledger
	// win is the output window of the turn in flight, or of the time
	// since the last one (see window); pending are reports of windows that
	// ended without their final one, for the stream's next line boundary.
	win     window
	pending []byte
	// token signs the shim's reports (see Report).
	token string
	// then is Config.Then until it is queued, thenAfter the id of the
	// request whose answer queues it; the stdout pump alone uses them
	// once the pumps run.
	then      []byte
	thenAfter string
	// stdin queues frames for the agent's stdin writer.
	stdin  chan []byte
	stderr []byte
	cur    *conn
	// attaches counts the attaches begun: the newest wins (serveConn).
	attaches uint64
	// detachedAt is when the last daemon left (or the shim started);
	// zero while one is attached.
	detachedAt time.Time
	// attachNote wakes watch when detachedAt changes (noteAttachLocked).
	attachNote chan struct{}
	quit       chan struct{}
	quitOnce   sync.Once

	wg sync.WaitGroup
}

// Serve runs a shim until its agent has exited and a daemon has its exit
// status (or the linger is over). It writes one Ready line to ready once
// the agent runs and the socket listens, or says why not. ctx ending
// (SIGTERM to the shim) stops the agent.
func Serve(ctx context.Context, provider core.SandboxProvider, cfg Config, ready io.Writer, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	optx.Default(&cfg.Linger, DefaultLinger)
	optx.Default(&cfg.Orphan, DefaultOrphan)
	s := &server{cfg: cfg, log: logger, ledger: newLedger(), quit: make(chan struct{}), attachNote: make(chan struct{}, 1),
		start: cfg.Base, end: cfg.Base, win: newWindow("", cfg.Base), detachedAt: time.Now(), token: cfg.Token}
	s.cond = sync.NewCond(&s.mu)
	stage, err := s.open(ctx, provider)
	if cfg.Opened != nil {
		cfg.Opened()
	}
	if err != nil {
		if cfg.Attached != nil {
			_ = cfg.Attached.Close()
		}
		_ = json.NewEncoder(ready).Encode(Ready{ShimPID: os.Getpid(), Stage: stage, Code: core.ErrorCode(err), Error: core.ErrorMessage(err)})
		return err
	}
	rd := Ready{ShimPID: os.Getpid(), AgentPID: s.proc.Pid()}
	if r, ok := s.sb.(core.SandboxRef); ok {
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
	if cfg.Attached != nil {
		s.wg.Add(1)
		go s.serveConn(cfg.Attached)
	}

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

// open starts the agent in its sandbox and hands it the job's input, then
// makes the spool, the pid file and the socket: the agent's own start (a
// runtime to set up, before it reads its first request) goes on
// meanwhile, and what it writes waits in its pipe until the pumps run.
// It returns which stage failed.
func (s *server) open(ctx context.Context, provider core.SandboxProvider) (string, error) {
	sb, err := provider.Open(ctx, s.cfg.Sandbox)
	if err != nil {
		return "sandbox", err
	}
	c := s.cfg.Command
	// The job's input goes before anything a daemon sends, written by the
	// sandbox as soon as the agent's stdin is made.
	proc, err := sb.Start(ctx, core.ProcSpec{Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir, Input: s.cfg.Input})
	if err != nil {
		_ = sb.Close(context.WithoutCancel(ctx))
		return "start", err
	}
	if len(s.cfg.Input) > 0 {
		s.noteStdin(s.cfg.Input)
	}
	if len(s.cfg.Then) > 0 {
		if kind, id, _ := acp.Classify(firstLine(s.cfg.Input)); kind == acp.KindRequest {
			s.then, s.thenAfter = s.cfg.Then, string(id)
		}
	}
	spool, ln, err := s.cfg.Bundle.create()
	if err != nil {
		_, _ = proc.Stop(context.WithoutCancel(ctx), time.Second)
		_ = sb.Close(context.WithoutCancel(ctx))
		return "shim", err
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

// noteStdin learns the daemon's requests and answers from lines it sends
// the agent, before the agent can see them.
func (s *server) noteStdin(payload []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prompt := s.ledger.sawDaemon(payload); prompt != "" {
		// A turn's window begins as its prompt goes to the agent; the one
		// it ends is told one last time if it dropped anything.
		if s.win.dropped > 0 {
			s.pending = append(s.pending, reportLine(s.win.report(s.token, true))...)
		}
		s.win = newWindow(prompt, s.end)
	}
}

// takePendingLocked returns the reports noteStdin left for the stream,
// which the stdout pump writes at its next line boundary.
func (s *server) takePendingLocked() []byte {
	p := s.pending
	s.pending = nil
	return p
}

// refuse answers a request of the agent that the shim refused, on its
// stdin, if the stdin queue has room: an agent that reads nothing gets
// nothing, and never holds the pump up.
func (s *server) refuse(line []byte) {
	select {
	case s.stdin <- line:
	default:
		s.log.Warn("a refusal was not written: the agent's stdin is full")
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
		var err error
		if payload == nil {
			// The daemon closed the agent's stdin, after what it sent before.
			err = s.proc.Stdin().Close()
		} else {
			_, err = s.proc.Stdin().Write(payload)
		}
		if err != nil {
			s.log.Warn("agent stdin", "err", err)
		}
	}
}

// sendThen queues Then for the agent once line, the answer to the request
// with id, is Input's request's and a success.
func (s *server) sendThen(id []byte, line []byte) {
	if s.then == nil || string(id) != s.thenAfter {
		return
	}
	then := s.then
	s.then = nil
	if !acp.Succeeded(line) {
		return
	}
	// Never held up: the queue is empty this early, and an agent that
	// answers late, its stdin full, only fails its own handshake.
	s.noteStdin(then)
	select {
	case s.stdin <- then:
		// The writer goes first (a shim runs on one P): the agent gets
		// its request before the answer is relayed.
		runtime.Gosched()
	default:
		s.log.Warn("the request after the first answer was not written: the agent's stdin is full")
	}
}

// firstLine is b up to its first newline.
func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i]
	}
	return b
}

// queueStdin hands a frame (nil: close stdin) to the stdin writer.
func (s *server) queueStdin(payload []byte) {
	select {
	case s.stdin <- payload:
	case <-s.quit:
	}
}
