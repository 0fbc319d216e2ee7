package http

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/berth-sh/berth"
)

// DefaultPingInterval is how long an SSE stream may stay silent before the
// server writes a ": ping" comment (CONTRACT §4.3: at least every 15 s).
const DefaultPingInterval = 15 * time.Second

// ServerOptions configures a Server.
type ServerOptions struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every request, over TCP and the Unix socket alike. Without it the TCP
	// listener must be on a loopback address.
	Token string
	// MaxPromptBytes is limits.max_prompt_bytes (0: 256 KiB). Request bodies
	// are capped a little above what such a prompt needs in JSON.
	MaxPromptBytes int
	// Logger receives request logs (debug) and internal errors (error).
	// nil discards them.
	Logger *slog.Logger
	// Version fills the health answer's version when the service leaves it
	// empty.
	Version string
	// PingInterval is the SSE keep-alive interval (0: DefaultPingInterval).
	PingInterval time.Duration
}

// Server serves a berth.SessionService over HTTP on a TCP address and a Unix
// socket. Its lifecycle is NewServer → Listen → Serve (blocking) → Close.
type Server struct {
	svc     berth.SessionService
	opts    ServerOptions
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler
	srv     *http.Server

	// pingInterval is how long an SSE stream waits for events before it
	// writes a ping comment.
	pingInterval time.Duration

	// shutdown ends when Close begins; long requests (SSE, prompt waits)
	// watch it so that the graceful shutdown does not wait on them.
	shutdown     context.Context
	stopRequests context.CancelFunc

	mu         sync.Mutex
	tcp        net.Listener
	unix       net.Listener
	socketPath string
	serving    bool
	closed     bool
	// serveWG counts the goroutines Serve starts, one per listener.
	serveWG sync.WaitGroup
}

// NewServer returns a server for svc. It does not listen yet.
func NewServer(svc berth.SessionService, opts ServerOptions) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{svc: svc, opts: opts, log: log, mux: http.NewServeMux(), pingInterval: opts.PingInterval}
	if s.pingInterval <= 0 {
		s.pingInterval = DefaultPingInterval
	}
	s.shutdown, s.stopRequests = context.WithCancel(context.Background())
	s.routes()
	s.handler = s.logRequests(s.recoverPanics(s.authenticate(http.HandlerFunc(s.route))))
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s
}

// routes registers every API route on the mux.
func (s *Server) routes() {
	s.mux.HandleFunc("GET /v1/health", s.handleHealth)
	s.mux.HandleFunc("GET /v1/agents", s.handleAgents)
	s.mux.HandleFunc("POST /v1/sessions", s.handleCreateSession)
	s.mux.HandleFunc("GET /v1/sessions", s.handleListSessions)
	s.mux.HandleFunc("GET /v1/sessions/{id}", s.handleGetSession)
	s.mux.HandleFunc("POST /v1/sessions/{id}/stop", s.handleStopSession)
	s.mux.HandleFunc("DELETE /v1/sessions/{id}", s.handleDeleteSession)
	s.mux.HandleFunc("POST /v1/sessions/{id}/prompts", s.handlePrompt)
	s.mux.HandleFunc("POST /v1/sessions/{id}/cancel", s.handleCancel)
	s.mux.HandleFunc("GET /v1/sessions/{id}/events", s.handleListEvents)
	s.mux.HandleFunc("GET /v1/sessions/{id}/events/stream", s.handleStreamEvents)
	s.mux.HandleFunc("GET /v1/sessions/{id}/transcript", s.handleTranscript)
	s.mux.HandleFunc("GET /v1/sessions/{id}/queue", s.handleListQueue)
	s.mux.HandleFunc("DELETE /v1/sessions/{id}/queue/{entry}", s.handleCancelQueueEntry)
	s.mux.HandleFunc("GET /v1/sessions/{id}/permissions", s.handleListPermissions)
	s.mux.HandleFunc("POST /v1/sessions/{id}/permissions/{perm}", s.handleDecidePermission)
	s.mux.HandleFunc("POST /v1/sessions/{id}/resume", s.handleResume)
	s.mux.HandleFunc("POST /v1/sessions/{id}/exec", s.handleExec)
	s.mux.HandleFunc("POST /v1/sessions/{id}/snapshots", s.handleCreateSnapshot)
	s.mux.HandleFunc("GET /v1/sessions/{id}/snapshots", s.handleListSnapshots)
	s.mux.HandleFunc("POST /v1/sessions/{id}/repair", s.handleRepair)
	s.uiRoutes()
}

// Handler returns the server's handler with its middleware (logging, panic
// recovery, auth), for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds the TCP address addr ("" for none) and the Unix socket at
// socketPath ("" for none). A non-loopback addr without a token is refused
// with EInvalid; a socket another daemon answers on is refused with
// EConflict. A stale socket file is replaced. Both serve the same handler
// once Serve runs.
func (s *Server) Listen(addr, socketPath string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return berth.Errorf(berth.EUnavailable, "the server is closed")
	case s.tcp != nil || s.unix != nil:
		return berth.Errorf(berth.EConflict, "the server is already listening")
	case addr == "" && socketPath == "":
		return berth.Errorf(berth.EInvalid, "nothing to listen on: give a TCP address or a socket path")
	}
	if addr != "" && s.opts.Token == "" {
		if err := requireLoopback(addr); err != nil {
			return err
		}
	}
	var tcp net.Listener
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return berth.WrapError(berth.EUnavailable, err, "cannot listen on %s", addr)
		}
		tcp = ln
	}
	if socketPath != "" {
		ln, err := listenUnix(socketPath)
		if err != nil {
			if tcp != nil {
				tcp.Close()
			}
			return err
		}
		s.unix, s.socketPath = ln, socketPath
	}
	s.tcp = tcp
	return nil
}

// Addr returns the bound TCP address ("127.0.0.1:43121" after ":0"), or ""
// when there is no TCP listener.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tcp == nil {
		return ""
	}
	return s.tcp.Addr().String()
}

// Serve serves every listener bound by Listen and blocks until Close ends
// them (then it returns nil) or one of them fails (then it stops the others
// and returns that error).
func (s *Server) Serve() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	if s.serving {
		s.mu.Unlock()
		return berth.Errorf(berth.EConflict, "the server is already serving")
	}
	var lns []net.Listener
	for _, ln := range []net.Listener{s.tcp, s.unix} {
		if ln != nil {
			lns = append(lns, ln)
		}
	}
	if len(lns) == 0 {
		s.mu.Unlock()
		return berth.Errorf(berth.EInvalid, "Serve before Listen")
	}
	s.serving = true
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		s.serveWG.Add(1)
		go func() {
			defer s.serveWG.Done()
			errc <- s.srv.Serve(ln)
		}()
	}
	s.mu.Unlock()

	var first error
	for range lns {
		err := <-errc
		if err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
			// One listener failed: end the others so Serve can return.
			s.srv.Close()
		}
	}
	return first
}

// Close shuts the server down gracefully: it stops accepting, ends SSE
// streams and prompt waits, waits for requests in flight until ctx ends
// (then it closes what is left and returns ctx's error), waits for Serve's
// goroutines and removes the socket file. Close is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	tcp, unix, socketPath := s.tcp, s.unix, s.socketPath
	s.mu.Unlock()

	s.stopRequests()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	// Listeners that Serve never took are closed here.
	for _, ln := range []net.Listener{tcp, unix} {
		if ln != nil {
			ln.Close()
		}
	}
	s.serveWG.Wait()
	if socketPath != "" {
		if rerr := os.Remove(socketPath); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// requestContext returns a context that ends with the request or when the
// server begins to shut down, whichever comes first.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.shutdown, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// shuttingDown reports whether Close has begun.
func (s *Server) shuttingDown() bool { return s.shutdown.Err() != nil }
