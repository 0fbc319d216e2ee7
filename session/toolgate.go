package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// The tools gate: each live session with berth_tools gets a Unix socket
// of its own, in a directory of the daemon's run dir
// ($BERTH_HOME/run/mcp-<id>/s) that is bound read-only at berth.ToolsDir
// into the session's sandbox and into nothing else. Its agent's
// `berth mcp` connects there and presents the session's credential, a
// random string minted at each agent start, given to `berth mcp` in its
// environment and stored only as its SHA-256. Under a root daemon the
// directory and the socket belong to the uid the sandbox runs as (bwrap's
// host uid, the docker container's user) with modes 0500 and 0600, so
// that no other uid can connect; otherwise to the daemon's user (0700,
// 0600). The socket stops answering when the session stops (the
// directory is removed) and is served again, with the stored hash, by a
// daemon that reattaches to the agent, once its boot has reattached every
// session.

// toolGate serves the tools sockets of the live sessions.
type toolGate struct {
	m *Manager
	// listenMu orders the making of a socket (serve, servePending) with
	// its revocation: one in progress finishes before the other starts.
	// Taken before mu.
	listenMu sync.Mutex
	mu       sync.Mutex
	closed   bool
	servers  map[string]*toolServer
	// pending are the sockets of the sessions a boot reattached, served
	// once every one is (servePending); a revoke meanwhile drops one.
	pending map[string]pendingSocket
	// serving counts the Serve goroutines and the calls in progress.
	serving sync.WaitGroup
}

// pendingSocket is a reattached session's socket not served yet: its
// credential's hash and the sandbox provider it is given to.
type pendingSocket struct {
	hash     string
	provider berth.SandboxProvider
}

// Bounds of a session's tools socket: connections served at once (more
// wait in the socket's backlog), time to read a request, and how long an
// idle connection is kept. A call itself may last (wait_child).
const (
	maxToolsConns    = 16
	toolsReadTimeout = 30 * time.Second
	toolsIdleTimeout = 30 * time.Second
)

// toolServer is one session's socket.
type toolServer struct {
	dir  string
	hash []byte
	ln   *trackedListener
	srv  *http.Server
}

// close stops serving the socket and ends every connection on it, the
// MCP streams its handler took over included.
func (ts *toolServer) close() {
	_ = ts.srv.Close()
	ts.ln.closeAll()
}

// toolsGrant is what an agent start needs of its session's tools: the
// socket's path as the agent sees it and the credential, and serve,
// which serves the socket and says why not when it cannot: the start
// calls it once the agent is on its way (only session/new, later, tells
// the agent of the socket).
type toolsGrant struct {
	socket string
	token  string
	serve  func() (warning string)
}

// enabled reports whether the daemon serves berth tools at all.
func (g *toolGate) enabled() bool { return g.m.opts.ToolsHandler != nil && g.m.opts.Berth != "" }

// runDir holds the tools socket directories ($BERTH_HOME/run).
func (g *toolGate) runDir() string {
	if g.m.opts.RunDir != "" {
		return g.m.opts.RunDir
	}
	return filepath.Join(g.m.opts.Home, "run")
}

// dir is session id's tools socket directory on the host.
func (g *toolGate) dir(id string) string { return filepath.Join(g.runDir(), "mcp-"+id) }

// grant mints a credential for the agent of session s about to
// start and makes its socket's directory, which the sandbox binds; the
// grant's serve serves the socket. It returns nil when the session has
// no berth tools, or, with a warning for the session's log, when the
// directory cannot be made (the session runs without them).
func (g *toolGate) grant(s *berth.Session, provider berth.SandboxProvider) (*toolsGrant, string) {
	if !s.BerthTools || !g.enabled() {
		return nil, ""
	}
	token := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(token))
	hash := hex.EncodeToString(sum[:])
	if err := makeGrantDir(g.runDir(), g.dir(s.ID), "tools"); err != nil {
		return nil, g.notGranted(s.ID, err)
	}
	s.ToolsHash = hash
	socket := filepath.Join(berth.ToolsDir, berth.ToolsSocketName)
	if !provider.Capabilities().Binds {
		// Nothing is bound: the agent sees the host's directory as it is.
		socket = filepath.Join(g.dir(s.ID), berth.ToolsSocketName)
	}
	id := s.ID
	serve := func() string {
		if err := g.serve(id, hash, provider); err != nil {
			return g.notGranted(id, err)
		}
		return ""
	}
	return &toolsGrant{socket: socket, token: token, serve: serve}, ""
}

// notGranted logs why session id's agent has no berth tools and returns
// the warning for the session's log.
func (g *toolGate) notGranted(id string, err error) string {
	g.m.logger.Warn("serve the berth tools", "session_id", id, "err", err)
	return "the berth MCP server is not available to this agent: " + berth.ErrorMessage(err)
}

// mcpServer is the berth entry of the agent's mcpServers.
func (g *toolGate) mcpServer(grant *toolsGrant) acp.McpServer {
	return acp.McpServer{Name: berth.ToolsServerName, Command: g.m.opts.Berth, Args: []string{"mcp"},
		Env: []acp.EnvVariable{{Name: berth.ToolsSocketEnv, Value: grant.socket}, {Name: berth.ToolsTokenEnv, Value: grant.token}}}
}

// bind is the bind of session s's tools directory into its sandbox,
// with ok false when it has none.
func (g *toolGate) bind(s *berth.Session) (berth.Bind, bool) {
	if s.ToolsHash == "" || !g.enabled() || !g.m.place.capsOf(s.Sandbox.Provider).Binds {
		return berth.Bind{}, false
	}
	return berth.Bind{Source: g.dir(s.ID), Target: berth.ToolsDir}, true
}

// serve serves session id's socket for the credential whose SHA-256
// is hashHex, in place of any it served before: the directory is kept
// (a running sandbox has it bound), the socket file made anew.
func (g *toolGate) serve(id, hashHex string, provider berth.SandboxProvider) error {
	g.listenMu.Lock()
	defer g.listenMu.Unlock()
	return g.serveLocked(id, hashHex, provider)
}

// serveAfterBoot has session id's socket served by servePending, once
// the boot has reattached every session: a thousand sockets made while
// the sessions reattach were a third of the boot's CPU, and every read of
// the API waited behind them. The agent's `berth mcp` finds no socket
// meanwhile, as while no daemon ran.
func (g *toolGate) serveAfterBoot(id, hashHex string, provider berth.SandboxProvider) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending == nil {
		g.pending = map[string]pendingSocket{}
	}
	g.pending[id] = pendingSocket{hash: hashHex, provider: provider}
}

// servePending serves the sockets serveAfterBoot left, but for those
// of sessions revoked meanwhile (a session that stopped).
func (g *toolGate) servePending() {
	g.mu.Lock()
	ids := make([]string, 0, len(g.pending))
	for id := range g.pending {
		ids = append(ids, id)
	}
	g.mu.Unlock()
	for _, id := range ids {
		g.listenMu.Lock()
		g.mu.Lock()
		p, ok := g.pending[id]
		delete(g.pending, id)
		g.mu.Unlock()
		if ok {
			if err := g.serveLocked(id, p.hash, p.provider); err != nil {
				g.m.logger.Warn("serve the berth tools again", "session_id", id, "err", err)
			}
		}
		g.listenMu.Unlock()
	}
}

// serveLocked is serve under listenMu.
func (g *toolGate) serveLocked(id, hashHex string, provider berth.SandboxProvider) error {
	hash, err := hex.DecodeString(hashHex)
	if err != nil || len(hash) != sha256.Size {
		return berth.Errorf(berth.EInternal, "the stored tools credential is malformed")
	}
	dir := g.dir(id)
	g.revokeLocked(id, false)
	ln, err := listenGrant(g.runDir(), dir, berth.ToolsSocketName, provider, "tools")
	if err != nil {
		return err
	}
	ts := &toolServer{dir: dir, hash: hash, ln: trackConns(ln)}
	// The agent is on the other side: it may hold connections open, or
	// open them by the thousand, and each would hold a daemon descriptor.
	// A few at a time is what its tools need; idle ones are closed.
	ts.srv = &http.Server{Handler: g.m.opts.ToolsHandler(g.opener(id, ts)), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: toolsReadTimeout, IdleTimeout: toolsIdleTimeout}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		_ = ln.Close()
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	if g.servers == nil {
		g.servers = map[string]*toolServer{}
	}
	g.servers[id] = ts
	g.serving.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.serving.Done()
		_ = ts.srv.Serve(netutil.LimitListener(ts.ln, maxToolsConns))
	}()
	return nil
}

// opener authorises one call on session id's socket: the credential
// must be the one ts serves, and the session live here.
func (g *toolGate) opener(id string, ts *toolServer) berth.ToolsOpener {
	return func(token string) (berth.ChildTools, func(), error) {
		sum := sha256.Sum256([]byte(token))
		if token == "" || subtle.ConstantTimeCompare(sum[:], ts.hash) != 1 {
			return nil, nil, berth.Errorf(berth.EUnauthenticated, "the berth tools credential is not valid")
		}
		ls := g.m.set.liveOf(id)
		if ls == nil || ls.Gone() {
			return nil, nil, berth.Errorf(berth.EUnauthenticated, "the berth tools credential is not valid: its session has stopped")
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.closed || g.servers[id] != ts {
			return nil, nil, berth.Errorf(berth.EUnavailable, "the berth tools of this session are no longer served here")
		}
		g.serving.Add(1)
		return &childTools{m: g.m, id: id}, g.serving.Done, nil
	}
}

// revoke stops serving session id's socket (or serving it after the
// boot), and with remove deletes its directory (the session stopped: the
// credential is dead).
func (g *toolGate) revoke(id string, remove bool) {
	g.listenMu.Lock()
	defer g.listenMu.Unlock()
	g.revokeLocked(id, remove)
}

// revokeLocked is revoke under listenMu.
func (g *toolGate) revokeLocked(id string, remove bool) {
	g.mu.Lock()
	ts := g.servers[id]
	delete(g.servers, id)
	delete(g.pending, id)
	g.mu.Unlock()
	if ts != nil {
		// Close cuts the calls in progress too: their contexts end.
		ts.close()
	}
	if remove {
		if err := os.RemoveAll(g.dir(id)); err != nil {
			g.m.logger.Warn("remove the tools directory", "session_id", id, "err", err)
		}
	}
}

// close stops serving every socket, leaving the files for the agents
// that outlive the daemon, and waits for the calls in progress.
func (g *toolGate) close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	servers := g.servers
	g.servers = nil
	g.mu.Unlock()
	for _, ts := range servers {
		ts.close()
	}
	return waitGroup(ctx, &g.serving)
}

// removeStale removes the tools directories of sessions not served
// by this daemon (their session stopped while no daemon ran), but for
// those in keep. entries are the run directory's.
func (g *toolGate) removeStale(entries []os.DirEntry, keep map[string]bool) {
	run := g.runDir()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), "mcp-")
		if !ok || !e.IsDir() || g.servers[id] != nil || keep[id] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(run, e.Name())); err != nil {
			g.m.logger.Warn("remove a stale tools directory", "session_id", id, "err", err)
		}
	}
}
