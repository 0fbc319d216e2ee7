// Package egress is the egress proxy of the allow-list network mode
// (docs/api.md, Network policy): an HTTP proxy, one per session, that
// tunnels CONNECT and forwards plain-HTTP requests only to the hosts of
// the session's allow list. A name is matched as the agent asked for it,
// never by an address it resolves to; the proxy resolves and dials it
// itself, and refuses a name whose addresses are the host's own or its
// networks' (berth.InternalAddr) unless an entry names such an address.
// A refused connection is told to Hooks.Denied (repeats coalesced), or,
// when the policy asks, becomes a question to Hooks.Ask.
//
// It imports only the root package, the standard library and
// golang.org/x/net: how a sandbox reaches it, and what the session makes
// of its hooks, are the callers'.
package egress

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/optx"
)

// Decision answers a question about a host the list does not allow.
type Decision int

// The answers to a question, as the permission request's options say
// them (docs/api.md, Network policy).
const (
	// Reject refuses the connection; the same host:port is refused
	// without a question for the coalescing window.
	Reject Decision = iota
	// AllowOnce lets this connection (and those waiting on the same
	// question) through.
	AllowOnce
	// AllowSession adds host:port to the session's list, and reports it
	// to Hooks.Allowed.
	AllowSession
)

// Hooks are what the proxy tells a session and asks of it. Each is
// called on the goroutine of the connection concerned (Ask on one of its
// own), never under the proxy's locks; any may be nil.
type Hooks struct {
	// Denied is told of a refused connection (host as
	// berth.NetworkHost.String writes it). Repeats of a host:port within
	// Options.Window are told once.
	Denied func(sessionID, host string, port int)
	// Ask decides a connection the list does not allow, in a policy that
	// asks; without it such a policy refuses as one that does not ask.
	// It must return when ctx ends (the session closes, or
	// Options.AskTimeout passes). Connections to the same host:port that
	// arrive while it is asked wait for the same answer. An error is a
	// Reject.
	Ask func(ctx context.Context, sessionID, host string, port int) (Decision, error)
	// Allowed is told of the entry an AllowSession added to the session's
	// list ("host:port"), for the session to keep it. The connections
	// that waited for the answer go on once it returns.
	Allowed func(sessionID, entry string)
}

// Resolver looks up the addresses of a name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects to an address ("ip:port"); *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Options configure a Proxy. Zero fields take the defaults below.
type Options struct {
	// Resolver resolves the names the list allows (net.DefaultResolver).
	Resolver Resolver
	// Dialer connects to the destinations (a net.Dialer).
	Dialer Dialer
	// DialTimeout bounds resolving and connecting (15 s).
	DialTimeout time.Duration
	// IdleTimeout ends a tunnel when no byte went either way for that
	// long, and bounds the wait for a forwarded request's answer (5 min).
	IdleTimeout time.Duration
	// AskTimeout bounds a question (5 min, the permission timeout's
	// default); no answer by then is a Reject.
	AskTimeout time.Duration
	// MaxConns bounds a session's connections in flight: tunnels,
	// forwarded requests and questions (64). Past it the proxy answers
	// 503; its listeners accept at most twice as many connections.
	MaxConns int
	// Window is how long repeats of a refusal are coalesced (1 min).
	Window time.Duration
	// Now is the clock of the coalescing window (time.Now).
	Now func() time.Time
	// Logger logs what the proxy could not do (nothing by default).
	Logger *slog.Logger
}

// withDefaults fills the zero fields of o.
func (o Options) withDefaults() Options {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{}
	}
	optx.Default(&o.DialTimeout, 15*time.Second)
	optx.Default(&o.IdleTimeout, 5*time.Minute)
	optx.Default(&o.AskTimeout, 5*time.Minute)
	optx.Default(&o.MaxConns, 64)
	optx.Default(&o.Window, time.Minute)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Proxy makes the sessions' proxies and closes them all.
type Proxy struct {
	opts Options

	mu       sync.Mutex
	sessions map[string]*Session
	closed   bool
}

// New returns a Proxy with opts.
func New(opts Options) *Proxy {
	return &Proxy{opts: opts.withDefaults(), sessions: map[string]*Session{}}
}

// Session returns the proxy of session id, which lets through what
// policy (an allow list) allows: serve it on the session's listener with
// Session.Serve, or mount it as a handler. EInvalid for a policy that is
// not a valid allow list, EConflict for an id that has one open,
// EUnavailable once the Proxy is closed.
func (p *Proxy) Session(id string, policy berth.NetworkPolicy, hooks Hooks) (*Session, error) {
	policy, err := policy.Normalize()
	if err != nil {
		return nil, err
	}
	if policy.Mode != berth.NetworkAllowList {
		return nil, berth.Errorf(berth.EInvalid, "network: the egress proxy serves an allow list, not the %s network", policy.Mode)
	}
	entries, err := policy.Entries()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, berth.Errorf(berth.EUnavailable, "the egress proxy is closed")
	}
	if _, ok := p.sessions[id]; ok {
		return nil, berth.Errorf(berth.EConflict, "session %s already has an egress proxy", id)
	}
	s := newSession(p, id, policy, entries, hooks)
	p.sessions[id] = s
	return s, nil
}

// Close closes every session's proxy and refuses new ones.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	open := slices.Collect(maps.Values(p.sessions))
	p.mu.Unlock()
	for _, s := range open {
		s.Close()
	}
	return nil
}

// forget drops s from the open sessions.
func (p *Proxy) forget(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions[s.id] == s {
		delete(p.sessions, s.id)
	}
}
