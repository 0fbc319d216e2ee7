package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/gateway"
	"github.com/berth-sh/berth/internal/atomicfile"
	"github.com/berth-sh/berth/session"
)

// gatewayPortFile, in the home (not the run directory, which holds what
// the sessions leave and is empty once they are gone), keeps the port the model
// gateway's loopback listener had, so that a restarted daemon listens on
// it again: the host sandbox's agents that outlived the previous daemon
// keep calling the URL they were given.
const gatewayPortFile = "gateway-port"

// maxGatewayConns bounds the connections the loopback listener serves at
// once (more wait in its backlog): the host sandbox's agents share it.
const maxGatewayConns = 512

// storeCredentials are the model gateway's credentials: the store's
// (docs/api.md, Credentials), read at every call. The daemon's own
// environment is never read, so that a key in it reaches no agent by any
// way.
type storeCredentials struct{ store berth.Store }

// Credential reads the credential name from the store.
func (c storeCredentials) Credential(ctx context.Context, name string) (string, error) {
	v, err := c.store.CredentialValue(ctx, name)
	if err != nil {
		return "", err
	}
	return string(v), nil
}

// lateSessions is the session manager as the gateway's Sessions: the
// gateway is made before the manager, which points its agents at it. A
// call before the manager exists is refused (no session's key is
// registered before it does).
type lateSessions struct {
	s atomic.Pointer[gateway.Sessions]
}

// set makes s the sessions the gateway asks and tells.
func (l *lateSessions) set(s gateway.Sessions) { l.s.Store(&s) }

// Admit asks the manager; none yet refuses.
func (l *lateSessions) Admit(ctx context.Context, id, upstream string) error {
	if s := l.s.Load(); s != nil {
		return (*s).Admit(ctx, id, upstream)
	}
	return berth.Errorf(berth.EUnavailable, "berth's daemon is starting")
}

// Called tells the manager.
func (l *lateSessions) Called(id string, c gateway.Call) {
	if s := l.s.Load(); s != nil {
		(*s).Called(id, c)
	}
}

// Missing tells the manager.
func (l *lateSessions) Missing(id, credential string) {
	if s := l.s.Load(); s != nil {
		(*s).Missing(id, credential)
	}
}

// modelGateway is the daemon's model gateway and the loopback listener
// where the host sandbox's agents call it (docs/api.md, The model
// gateway).
type modelGateway struct {
	gw       *gateway.Gateway
	sessions *lateSessions
	ln       net.Listener
	srv      *http.Server
	served   chan struct{}
	url      string
}

// openGateway makes the model gateway of cfg's [[models]] over the
// store's credentials, listening on a loopback port (the previous
// daemon's when it is free) of runDir's record.
func openGateway(cfg *config.Config, store berth.Store, home string, logger *slog.Logger) (*modelGateway, error) {
	table, err := cfg.Upstreams()
	if err != nil {
		return nil, err
	}
	mg := &modelGateway{sessions: &lateSessions{}}
	mg.gw, err = gateway.New(gateway.Options{Upstreams: table, Credentials: storeCredentials{store}, Sessions: mg.sessions, Logger: logger})
	if err != nil {
		return nil, err
	}
	if mg.ln, err = listenGateway(home); err != nil {
		return nil, err
	}
	mg.url = "http://" + mg.ln.Addr().String()
	// Answers stream for as long as the model writes: no write timeout.
	mg.srv = &http.Server{Handler: mg.gw, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	return mg, nil
}

// listenGateway listens on 127.0.0.1, on the port the home records when
// it is free, else on one the kernel picks (recorded for the next daemon).
func listenGateway(home string) (net.Listener, error) {
	path := filepath.Join(home, gatewayPortFile)
	if b, err := os.ReadFile(path); err == nil {
		if port, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && port > 0 && port < 65536 {
			if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				return ln, nil
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, berth.WrapError(berth.EUnavailable, err, "the model gateway cannot listen on the loopback")
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	// Not synced: a power loss that loses the port also ends every agent
	// that was told it, and the next daemon may then take any port.
	if err := atomicfile.WriteFileUnsynced(path, []byte(port+"\n")); err != nil {
		_ = ln.Close()
		return nil, berth.WrapError(berth.EUnavailable, err, "cannot record the model gateway's port")
	}
	return ln, nil
}

// options are the session manager's view of the gateway.
func (mg *modelGateway) options() *session.ModelGateway {
	return &session.ModelGateway{Gateway: mg.gw, HostURL: mg.url}
}

// start serves the loopback listener, with mgr as the gateway's sessions,
// until close.
func (mg *modelGateway) start(mgr *session.Manager) {
	mg.sessions.set(mgr.GatewaySessions())
	mg.served = make(chan struct{})
	go func() {
		defer close(mg.served)
		_ = mg.srv.Serve(netutil.LimitListener(mg.ln, maxGatewayConns))
	}()
}

// close stops serving (calls in flight are cut: their sessions have
// stopped, or their agents carry on to the next daemon) and waits, until
// ctx ends, for the gateway's callbacks.
func (mg *modelGateway) close(ctx context.Context) error {
	err := mg.srv.Close()
	if mg.served != nil {
		<-mg.served
	} else {
		_ = mg.ln.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, mg.gw.Close(ctx))
}
