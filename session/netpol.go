package session

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/gateway/egress"
	"github.com/berth-sh/berth/gateway/relay"
)

// allowList is the policy a session's record keeps beside its Network
// bool: p when it is an allow list, else nil.
func allowList(p berth.NetworkPolicy) *berth.NetworkPolicy {
	if p.Mode != berth.NetworkAllowList {
		return nil
	}
	return &p
}

// checkAllowList refuses an allow list in a sandbox that cannot enforce
// it: one that does not isolate (host) or that always has the host's
// network, where the agent could connect around the egress proxy
// (docs/api.md, Network policy).
func checkAllowList(p berth.NetworkPolicy, provider string, caps berth.SandboxCapabilities) error {
	if p.Mode != berth.NetworkAllowList || (caps.Binds && !caps.HostNetwork) {
		return nil
	}
	return fieldError("network", fmt.Sprintf("network: an allow list needs a sandbox that cuts the network (bwrap or docker); sandbox %s cannot stop a direct connection", provider))
}

// In an isolating sandbox with an allow list, the agent's HTTP_PROXY and
// the others point at egressAddr on the sandbox's own loopback, which
// `berth agent-exec` relays to the socket egressSocket in the session's
// gateway directory (modelsock.go); the daemon serves that socket with the
// session's egress proxy (package gateway/egress), and serves it again
// when it reattaches. The sandbox has no network of its own.
const (
	egressAddr   = relay.DefaultEgressListen
	egressSocket = "egress"
)

// netGate serves the egress proxies of the sessions with an allow list.
type netGate struct {
	m *Manager

	mu      sync.Mutex
	closed  bool
	proxy   *egress.Proxy
	open    map[string]*egress.Session
	serving sync.WaitGroup // the Serve goroutines
}

// egressed reports whether session s's agent goes out through the egress
// proxy: its policy is an allow list, its sandbox isolates, and the berth
// binary is there to relay.
func (n *netGate) egressed(s *berth.Session) bool {
	return s.Sandbox.NetworkPolicy != nil && n.m.opts.Berth != "" && n.m.place.capsOf(s.Sandbox.Provider).Binds
}

// env is the environment that points session s's agent at its egress
// proxy; nil without one. NO_PROXY keeps the model gateway, on the same
// loopback, direct.
func (n *netGate) env(s *berth.Session) map[string]string {
	if !n.egressed(s) {
		return nil
	}
	env := map[string]string{"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env[k] = "http://" + egressAddr
		env[strings.ToLower(k)] = "http://" + egressAddr
	}
	return env
}

// args are the flags of `berth agent-exec` that relay session s's egress
// proxy, nil without one.
func (n *netGate) args(s *berth.Session) []string {
	if !n.egressed(s) {
		return nil
	}
	return []string{"--egress-listen", egressAddr, "--egress-socket", relayDir + "/" + egressSocket}
}

// beside is what runs a command beside session s's agent (exec, the
// agent's terminals) with the agent's way out, the egress proxy, as
// AgentStart.Beside: `berth agent-exec` relaying the egress port in the
// command's own sandbox (bwrap gives each process its own network). Nil
// without an allow list, and where every process shares one sandbox
// (a container: berth.SandboxReopener), whose loopback has the agent's
// relay already; the command has the proxy variables either way.
func (n *netGate) beside(s *berth.Session, provider berth.SandboxProvider) []string {
	if !n.egressed(s) {
		return nil
	}
	if _, shared := provider.(berth.SandboxReopener); shared {
		return nil
	}
	argv := []string{n.m.opts.Berth, "agent-exec", "--gateway-listen", "", "--gateway-socket", ""}
	return append(append(argv, n.args(s)...), "--")
}

// grant serves session s's egress proxy on its socket in provider's
// sandbox, in place of any it served before, with the session's allow
// list as the record keeps it. What fails is logged and returned as the
// session's warning: the agent then reaches nothing but the gateway.
func (n *netGate) grant(s *berth.Session, provider berth.SandboxProvider) (warning string) {
	if !n.egressed(s) || provider == nil {
		return ""
	}
	if err := n.serve(s, provider); err != nil {
		n.m.logger.Warn("egress proxy: serve a session's socket", "session_id", s.ID, "err", err)
		return "the agent reaches no host of its allow list: " + berth.ErrorMessage(err)
	}
	return ""
}

// serve is grant's work.
func (n *netGate) serve(s *berth.Session, provider berth.SandboxProvider) error {
	n.revoke(s.ID, false)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	if n.proxy == nil {
		o := n.m.opts.Egress
		o.Logger, o.AskTimeout = n.m.logger, n.m.opts.Limits.PermissionTimeout
		n.proxy = egress.New(o)
		n.open = map[string]*egress.Session{}
	}
	es, err := n.proxy.Session(s.ID, *s.Sandbox.NetworkPolicy, egress.Hooks{Denied: n.denied, Ask: n.ask, Allowed: n.allowed})
	if err != nil {
		n.mu.Unlock()
		return err
	}
	n.open[s.ID] = es
	n.mu.Unlock()
	ln, err := listenGrant(n.m.tools.runDir(), n.m.models.sockDir(s.ID), egressSocket, provider, "egress proxy")
	if err != nil {
		n.revoke(s.ID, false)
		return err
	}
	n.serving.Add(1)
	go func() {
		defer n.serving.Done()
		_ = es.Serve(ln)
	}()
	return nil
}

// revoke closes session id's egress proxy, and with removeDir the
// gateway directory its socket is in (the session stopped).
func (n *netGate) revoke(id string, removeDir bool) {
	n.mu.Lock()
	es := n.open[id]
	delete(n.open, id)
	n.mu.Unlock()
	if es != nil {
		_ = es.Close()
	}
	if removeDir {
		if err := os.RemoveAll(n.m.models.sockDir(id)); err != nil {
			n.m.logger.Warn("remove the egress proxy's directory", "session_id", id, "err", err)
		}
	}
}

// close closes every egress proxy, leaving the socket files for the
// agents that outlive the daemon, and waits for the Serve goroutines.
func (n *netGate) close(ctx context.Context) error {
	n.mu.Lock()
	n.closed = true
	p := n.proxy
	n.open = nil
	n.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
	return waitGroup(ctx, &n.serving)
}

// denied logs network_denied on the session.
func (n *netGate) denied(id, host string, port int) {
	if ls := n.m.set.liveOf(id); ls != nil {
		ls.NetworkDenied(host, port)
	}
}

// ask puts a connection the list does not allow to the session as a
// permission request.
func (n *netGate) ask(ctx context.Context, id, host string, port int) (egress.Decision, error) {
	ls := n.m.set.liveOf(id)
	if ls == nil {
		return egress.Reject, nil
	}
	kind, err := ls.AskConnect(ctx, host, port)
	switch {
	case err != nil:
		return egress.Reject, err
	case kind == berth.DecisionAllowAlways:
		return egress.AllowSession, nil
	case kind == berth.DecisionAllowOnce:
		return egress.AllowOnce, nil
	}
	return egress.Reject, nil
}

// allowed keeps an entry allowed for the session in its record.
func (n *netGate) allowed(id, entry string) {
	ls := n.m.set.liveOf(id)
	if ls == nil {
		return
	}
	if err := ls.AllowHost(context.Background(), entry); err != nil {
		n.m.logger.Warn("egress proxy: keep a host allowed for the session", "session_id", id, "entry", entry, "err", err)
	}
}
