package http

import (
	"context"
	"crypto/sha256"
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
// server writes a ": ping" comment (docs/api.md, Events: every 15 s).
const DefaultPingInterval = 15 * time.Second

// maxHeaderBytes caps a request's line and headers: far above what any
// client of the API or the UI sends, far below net/http's 1 MiB default, so
// that clients without a token cannot make each connection cost a megabyte.
const maxHeaderBytes = 64 << 10

// ServerOptions configures a Server.
type ServerOptions struct {
	// Token is required on every TCP request, as "Authorization: Bearer
	// <token>" or through a sign-in cookie got with it (docs/api.md,
	// Sign-in and browser safety). The Unix socket needs none. Listen
	// refuses a TCP address without a token unless LoopbackWithoutToken is
	// set and the address is loopback.
	Token string
	// LoopbackWithoutToken allows a token-less TCP listener on loopback.
	LoopbackWithoutToken bool
	// AllowedHosts are Host names accepted on TCP besides the listen host,
	// localhost, 127.0.0.1 and [::1].
	AllowedHosts []string
	// AllowedOrigins are browser origins (scheme://host[:port]) allowed to
	// call the API besides the daemon's own; they get CORS headers.
	AllowedOrigins []string
	// SessionTTL is how long a browser sign-in lasts (0: DefaultSessionTTL).
	SessionTTL time.Duration
	// BodyTimeout is how long a request body may take to arrive (0:
	// DefaultBodyTimeout).
	BodyTimeout time.Duration
	// WriteTimeout is how long one write to a client may take before the
	// connection is cut (0: DefaultWriteTimeout).
	WriteTimeout time.Duration
	// MaxConnections caps the open TCP connections (0:
	// DefaultMaxConnections).
	MaxConnections int
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
	// Hooks answers /v1/hooks and /v1/hooks/deliveries; nil answers empty
	// lists.
	Hooks berth.HookService
	// Metrics serves GET /metrics (the Prometheus text format); nil
	// answers 404.
	Metrics http.Handler
	// Cluster is the cluster this daemon is a node of: writes to a session
	// another node owns are forwarded there, and GET /v1/nodes lists the
	// nodes. nil: one node (docs/api.md, Cluster nodes).
	Cluster Cluster
	// Credentials serves /v1/credentials (docs/api.md, Credentials); nil
	// lists none and sets none.
	Credentials berth.CredentialStore
	// SignIns keeps the browser sign-ins, so that they outlive a restart
	// and every node of a cluster accepts them (docs/api.md, Sign-in and
	// browser safety); nil keeps them in the server's memory only.
	SignIns berth.SignInStore
	// Reading, when set, is called as a short read (a GET that neither
	// streams nor waits) starts, and what it returns as the read ends: a
	// booting daemon's background work gives way to them.
	Reading func() (done func())
}

// Server serves a berth.SessionService over HTTP on a TCP address and a Unix
// socket. Its lifecycle is NewServer → Listen → Serve (blocking) → Close.
// It owns the middleware every request goes through (middleware.go); the
// handlers are small types, one per area of the API, each given only the
// part of the service it calls, and registered in routes.go.
type Server struct {
	// edge answers errors, decodes bodies and watches the shutdown for the
	// middleware as for the handlers.
	*edge
	opts    ServerOptions
	mux     *http.ServeMux
	handler http.Handler
	srv     *http.Server
	// forwarder proxies writes to their session's owner; nil without a
	// cluster.
	forwarder *forwarder
	// nodeToken is the SHA-256 of the cluster's node token; nil when there
	// is none.
	nodeToken *[sha256.Size]byte

	// signins are the browser sign-ins (cookie values), codes the
	// one-time sign-in codes, failed the wrong tokens per address.
	signins *signInBook
	codes   *expiring
	failed  *failures

	// stopRequests ends edge.shutdown.
	stopRequests context.CancelFunc

	mu         sync.Mutex
	tcp        *limitListener
	unix       net.Listener
	socketPath string
	serving    bool
	closed     bool
	// serveWG counts the goroutines Serve starts, one per listener.
	serveWG sync.WaitGroup
	// patterns are the routes registered, in order (APIRoutes).
	patterns []string
}

// NewServer returns a server for svc. It does not listen yet.
func NewServer(svc berth.SessionService, opts ServerOptions) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	shutdown, stopRequests := context.WithCancel(context.Background())
	s := &Server{edge: &edge{log: log, maxPrompt: maxPromptOf(opts.MaxPromptBytes), shutdown: shutdown},
		stopRequests: stopRequests, opts: opts, mux: http.NewServeMux(),
		signins: newSignInBook(opts.SignIns, opts.Token, log), codes: newExpiring(time.Now), failed: newFailures(time.Now)}
	s.routes(svc)
	if opts.Cluster != nil {
		s.forwarder = s.newForwarder(opts.Cluster)
		if tok := opts.Cluster.Token(); tok != "" {
			sum := sha256.Sum256([]byte(tok))
			s.nodeToken = &sum
		}
	}
	// Order matters: the body deadline is set before anything can leave a
	// body unread; the browser guards and auth run before the body is read,
	// so a refused request costs no memory; nothing runs a handler before
	// all of them passed; a write is forwarded to its session's owner only
	// once this node let it in and holds its whole body.
	s.handler = s.logRequests(s.recoverPanics(s.bodyDeadline(s.guardBrowser(s.authenticate(s.readBody(s.forward(http.HandlerFunc(s.route))))))))
	s.srv = &http.Server{
		Handler:           s.handler,
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s
}

// Handler returns the server's handler with its middleware (logging, panic
// recovery, body deadline, browser guards, auth), for tests and for
// embedding. A request it serves counts as TCP unless it came on the
// server's own Unix socket.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds the TCP address addr ("" for none) and the Unix socket at
// socketPath ("" for none). A TCP addr without a token is refused with
// EInvalid, unless LoopbackWithoutToken is set and addr is loopback; a
// socket another daemon answers on is refused with EConflict. A stale
// socket file is replaced. Both serve the same handler once Serve runs.
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
		if !s.opts.LoopbackWithoutToken {
			return berth.Errorf(berth.EInvalid, "refusing to listen on %s without a token: TCP always needs one ([server] token, or the generated $BERTH_HOME/token)", addr)
		}
		if err := RequireLoopback(addr); err != nil {
			return err
		}
	}
	var tcp *limitListener
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return berth.WrapError(berth.EUnavailable, err, "cannot listen on %s", addr)
		}
		tcp = newLimitListener(ln, s.maxConnections(), s.writeTimeout(), s.log)
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
	if s.tcp != nil {
		lns = append(lns, s.tcp)
	}
	if s.unix != nil {
		lns = append(lns, s.unix)
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
	if tcp != nil {
		tcp.Close()
	}
	if unix != nil {
		unix.Close()
	}
	s.serveWG.Wait()
	if s.forwarder != nil {
		s.forwarder.close()
	}
	if socketPath != "" {
		if rerr := os.Remove(socketPath); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}
