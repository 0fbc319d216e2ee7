package session

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway/relay"
)

// In an isolating sandbox (bwrap, docker) the agent calls the model
// gateway on the sandbox's own loopback, at relayAddr: its command runs
// under `berth agent-exec` (package gateway/relay), which listens there
// and relays each connection to a Unix socket of the session's own,
// $BERTH_HOME/run/gw-<id>/s, bound read-only at relayDir. The daemon
// serves that socket with the gateway for that session's key alone, and
// serves it again, at the same path, when it reattaches to the agent.
// The sandbox never reaches the host's loopback.
const (
	relayAddr   = relay.DefaultListen
	relayDir    = "/run/berth-gw"
	relaySocket = "s"
	// maxModelConns bounds the connections a session's socket serves at
	// once (more wait in its backlog): each holds a daemon descriptor, and
	// the agent may open them by the thousand.
	maxModelConns = 64
)

// modelSockets are the gateway's sockets of the live sessions.
type modelSockets struct {
	mu      sync.Mutex
	closed  bool
	servers map[string]*http.Server
	serving sync.WaitGroup // the Serve goroutines
}

// sockDir is session id's gateway socket directory on the host.
func (g *modelGate) sockDir(id string) string { return filepath.Join(g.m.tools.runDir(), "gw-"+id) }

// relayed reports whether session s's agent (spec) calls the gateway
// through the relay: it calls a model API and runs in a sandbox that
// binds (one that isolates), and the berth binary is there to relay.
func (g *modelGate) relayed(s *berth.Session, spec berth.AgentSpec) bool {
	return kindOf(spec) != "" && g.enabled() && g.m.opts.Berth != "" && g.m.place.capsOf(s.Sandbox.Provider).Binds
}

// wrap is the program and arguments that start session s's agent (spec,
// from program) under the relay, with ok false when it is not relayed:
// to the gateway, to the egress proxy (netpol.go), or both.
func (g *modelGate) wrap(s *berth.Session, spec berth.AgentSpec, program string) (string, []string, bool) {
	model := g.relayed(s, spec) && g.env(s, spec) != nil
	out := g.m.net.args(s)
	if !model && out == nil {
		return "", nil, false
	}
	args := []string{"agent-exec", "--gateway-listen", "", "--gateway-socket", ""}
	if model {
		args[2], args[4] = relayAddr, relayDir+"/"+relaySocket
	}
	args = append(append(append(args, out...), "--", program), spec.Args...)
	return g.m.opts.Berth, args, true
}

// bind is the bind of session s's gateway socket directory into its
// sandbox, with ok false when it has none: the directory holds the
// gateway's socket and the egress proxy's.
func (g *modelGate) bind(s *berth.Session, spec berth.AgentSpec) (berth.Bind, bool) {
	if !g.relayed(s, spec) && !g.m.net.egressed(s) {
		return berth.Bind{}, false
	}
	return berth.Bind{Source: g.sockDir(s.ID), Target: relayDir}, true
}

// serveSocket serves session id's gateway socket, in place of any it
// served before.
func (g *modelGate) serveSocket(id string, provider berth.SandboxProvider) error {
	g.revokeSocket(id, false)
	ln, err := listenGrant(g.m.tools.runDir(), g.sockDir(id), relaySocket, provider, "model gateway")
	if err != nil {
		return err
	}
	// Answers stream for as long as the model writes: no write timeout.
	srv := &http.Server{Handler: g.m.opts.Models.Gateway.ForSession(id), ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 90 * time.Second}
	ss := &g.socks
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		_ = ln.Close()
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	if ss.servers == nil {
		ss.servers = map[string]*http.Server{}
	}
	ss.servers[id] = srv
	ss.serving.Add(1)
	ss.mu.Unlock()
	go func() {
		defer ss.serving.Done()
		_ = srv.Serve(netutil.LimitListener(ln, maxModelConns))
	}()
	return nil
}

// revokeSocket stops serving session id's socket, and with remove
// deletes its directory (the session stopped).
func (g *modelGate) revokeSocket(id string, remove bool) {
	ss := &g.socks
	ss.mu.Lock()
	srv := ss.servers[id]
	delete(ss.servers, id)
	ss.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	if remove {
		if err := os.RemoveAll(g.sockDir(id)); err != nil {
			g.m.logger.Warn("remove the model gateway directory", "session_id", id, "err", err)
		}
	}
}

// close stops serving every socket, leaving the files for the agents
// that outlive the daemon, and waits for the Serve goroutines.
func (g *modelGate) close(ctx context.Context) error {
	ss := &g.socks
	ss.mu.Lock()
	ss.closed = true
	servers := ss.servers
	ss.servers = nil
	ss.mu.Unlock()
	for _, srv := range servers {
		_ = srv.Close()
	}
	return waitGroup(ctx, &ss.serving)
}

// removeStale removes the gateway directories of sessions not served by
// this daemon, but for those in keep. entries are the run directory's.
func (g *modelGate) removeStale(entries []os.DirEntry, keep map[string]bool) {
	run := g.m.tools.runDir()
	ss := &g.socks
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "gw-")
		if !ok || !e.IsDir() || ss.servers[id] != nil || keep[id] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(run, e.Name())); err != nil {
			g.m.logger.Warn("remove a stale model gateway directory", "session_id", id, "err", err)
		}
	}
}
