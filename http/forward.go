package http

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
)

// ForwardedByHeader names the node that forwarded a request to the
// session's owner (docs/api.md, Cluster nodes). A request carrying it is
// never forwarded again, and on TCP only the node token lets it in.
const ForwardedByHeader = "Berth-Forwarded-By"

// forwardDialTimeout bounds how long reaching an owner may take. The
// answer itself has no bound: a prompt with ?wait=true waits for its turn.
const forwardDialTimeout = 3 * time.Second

// Cluster is what a Server needs of the cluster its daemon is a node of
// (docs/api.md, Cluster nodes). nil in ServerOptions means one node:
// nothing is forwarded and GET /v1/nodes lists this daemon alone.
type Cluster interface {
	// Self is this node's id.
	Self() string
	// Token is the node token: forwarded requests carry it, and it lets
	// in (on TCP) only requests that carry ForwardedByHeader. "" leaves
	// forwarded requests to the server's own token.
	Token() string
	// Owner names the node that drives a session and the base URL it is
	// reached at (its advertise URL): the holder of the session's live
	// lease, or "" when none does (a stopped session, a session nobody
	// placed yet). It may answer Self.
	Owner(ctx context.Context, sessionID string) (node, advertise string, err error)
	// Nodes lists the nodes sharing the store, oldest first.
	Nodes(ctx context.Context) ([]*berth.Node, error)
}

// forwarder proxies a session's writes to the node that owns it.
type forwarder struct {
	cluster   Cluster
	proxy     *httputil.ReverseProxy
	transport *http.Transport
}

// proxyTarget keys the owner's id and URL in an outgoing request's context.
type proxyTarget struct {
	node string
	url  *url.URL
}

// targetKey keys the proxyTarget.
type targetKey struct{}

// newForwarder returns the forwarder of a server in cluster c.
func (s *Server) newForwarder(c Cluster) *forwarder {
	dialer := &net.Dialer{Timeout: forwardDialTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:               nil, // nodes talk directly, whatever the environment says
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: forwardDialTimeout,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	f := &forwarder{cluster: c, transport: transport}
	f.proxy = &httputil.ReverseProxy{
		Transport:  transport,
		BufferPool: proxyBuffers{},
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(proxyTarget)
			pr.SetURL(t.url)
			h := pr.Out.Header
			// The client's credentials are for this node: the owner gets
			// the node token instead. Browser headers were checked here.
			for _, k := range []string{"Authorization", "Cookie", "Origin", "Referer",
				"Sec-Fetch-Site", "Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"} {
				h.Del(k)
			}
			if tok := c.Token(); tok != "" {
				h.Set("Authorization", "Bearer "+tok)
			}
			h.Set(ForwardedByHeader, c.Self())
			// One id in both nodes' logs.
			h.Set(RequestIDHeader, requestID(pr.In.Context()))
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.restoreOwnHeaders(w, r)
			if s.shuttingDown() {
				// The owner may still answer, but not through this node.
				s.writeError(w, r, berth.WrapError(berth.EUnavailable, err, "the daemon is shutting down; the request may have reached the session's owner"))
				return
			}
			if r.Context().Err() != nil {
				// The client went away: no one to answer.
				return
			}
			t := r.Context().Value(targetKey{}).(proxyTarget)
			s.writeError(w, r, &berth.Error{Code: berth.EUnavailable,
				Message: "node " + t.node + " (" + t.url.String() + "), which drives this session, cannot be reached: " + err.Error(),
				Details: map[string]any{"node": t.node}, Err: err})
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return f
}

// close drops the connections to other nodes kept for reuse.
func (f *forwarder) close() { f.transport.CloseIdleConnections() }

// proxyBuffers lends the proxy its copy buffers, so a forward does not
// allocate 32 KiB for each answer it passes back.
type proxyBuffers struct{}

// bufferPool holds *[]byte of 32 KiB.
var bufferPool = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// Get implements httputil.BufferPool.
func (proxyBuffers) Get() []byte { return *bufferPool.Get().(*[]byte) }

// Put implements httputil.BufferPool.
func (proxyBuffers) Put(b []byte) { bufferPool.Put(&b) }

// forward sends a write to a session (any method but GET and HEAD on
// /v1/sessions/{id} and below, and a turn's long poll: see ownerRoute) to
// the node that owns it, when that is not this one, and passes the owner's
// answer back unchanged. A request forwarded to this node that this node
// does not own is refused with 503 not_owner: a request is forwarded at
// most once. Everything else, and everything when there is no cluster, is
// served here.
func (s *Server) forward(next http.Handler) http.Handler {
	if s.opts.Cluster == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.ownerRoute(r)
		if !ok {
			if authOf(r) == viaNode {
				// The node token is for what is forwarded to an owner only.
				s.writeError(w, r, berth.Errorf(berth.EForbidden, "the node token only authenticates requests forwarded to a session's owner"))
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		c := s.opts.Cluster
		node, advertise, err := c.Owner(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if node == "" || node == c.Self() {
			next.ServeHTTP(w, r)
			return
		}
		if r.Header.Get(ForwardedByHeader) != "" {
			s.writeError(w, r, &berth.Error{Code: berth.EUnavailable,
				Message: "node " + c.Self() + " does not drive session " + id + " (node " + node + " does): the request was forwarded here before the session moved; retry it",
				Details: map[string]any{"reason": "not_owner", "node": node}})
			return
		}
		target, err := url.Parse(advertise)
		if err != nil || target.Host == "" || (target.Scheme != "http" && target.Scheme != "https") {
			s.writeError(w, r, &berth.Error{Code: berth.EUnavailable,
				Message: "node " + node + ", which drives this session, has no usable advertise URL (" + advertise + ")",
				Details: map[string]any{"node": node}})
			return
		}
		ctx, cancel := s.requestContext(r)
		defer cancel()
		ctx = context.WithValue(ctx, targetKey{}, proxyTarget{node: node, url: target})
		// The owner's answer carries its own copies of these.
		for _, k := range ownHeaders {
			w.Header().Del(k)
		}
		s.forwarder.proxy.ServeHTTP(w, r.WithContext(ctx))
	})
}

// ownHeaders are headers this server sets on every answer before the
// handler runs, which the owner's answer brings back with the same values.
var ownHeaders = []string{RequestIDHeader, "Cache-Control", "X-Content-Type-Options"}

// restoreOwnHeaders puts back what forward removed, for an answer this node
// writes itself.
func (s *Server) restoreOwnHeaders(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(RequestIDHeader, requestID(r.Context()))
	setAPIHeaders(w.Header())
}

// ownerRoute reports whether r must be served by its session's owner: a
// write to one session (a route of the API, not a 404 or 405, under
// /v1/sessions/{id} with a method other than GET and HEAD), or the long
// poll of a turn (GET …/turns/{turn}), which only the node running the
// turn can answer as it ends. It returns the session's id.
func (s *Server) ownerRoute(r *http.Request) (string, bool) {
	id := sessionOfPath(r.URL.Path)
	if id == "" {
		return "", false
	}
	_, pattern := s.mux.Handler(r)
	if pattern == "GET /v1/sessions/{id}/turns/{turn}" {
		return id, true
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return "", false
	}
	_, path, _ := strings.Cut(pattern, " ")
	if !strings.HasPrefix(path, "/v1/sessions/{id}") {
		return "", false
	}
	return id, true
}

// maxHandoffAnswer bounds the answer of a node asked to resume a session.
const maxHandoffAnswer = 1 << 20

// ResumeOn asks node, reached at advertise, to resume session id (a lost
// node's session moving there: docs/api.md, "Failover with an object
// store"). It goes as a forwarded request does, through the forwarding
// client, with the node token. An error that never reached the node has
// details.reason "unreachable"; the node's error answer comes back as
// its code, message and details.
func (s *Server) ResumeOn(ctx context.Context, node, advertise, id string) error {
	if s.forwarder == nil {
		return berth.Errorf(berth.EUnavailable, "this daemon is not a node of a cluster")
	}
	unreachable := func(err error) error {
		return &berth.Error{Code: berth.EUnavailable, Message: "node " + node + " (" + advertise + ") cannot be reached: " + err.Error(),
			Details: map[string]any{"reason": "unreachable"}, Err: err}
	}
	target, err := url.Parse(advertise)
	if err != nil || target.Host == "" || (target.Scheme != "http" && target.Scheme != "https") {
		return unreachable(berth.Errorf(berth.EInvalid, "no usable advertise URL"))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.JoinPath("/v1/sessions", id, "resume").String(), nil)
	if err != nil {
		return unreachable(err)
	}
	c := s.opts.Cluster
	if tok := c.Token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set(ForwardedByHeader, c.Self())
	resp, err := s.forwarder.transport.RoundTrip(req)
	if err != nil {
		return unreachable(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHandoffAnswer))
	if err != nil {
		return berth.WrapError(berth.EUnavailable, err, "node %s's answer to the resume of session %s was cut", node, id)
	}
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	var e errorBody
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return berth.Errorf(berth.EUnavailable, "node %s answered the resume of session %s with HTTP %d", node, id, resp.StatusCode)
	}
	return &berth.Error{Code: e.Error.Code, Message: "node " + node + ": " + e.Error.Message, Details: e.Error.Details}
}
