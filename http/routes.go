package http

import (
	"net/http"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/internal/optx"
)

// routes makes the handlers of each area of the API, each given only the
// part of svc it calls, and registers every route on the mux: the one place
// a route is added (docs/api.md, Endpoints served).
func (s *Server) routes(svc berth.SessionService) {
	o := s.opts
	pingInterval := o.PingInterval
	optx.Default(&pingInterval, DefaultPingInterval)
	ttl := o.SessionTTL
	optx.Default(&ttl, DefaultSessionTTL)
	daemon := &daemonInfo{edge: s.edge, svc: svc, version: o.Version, cluster: o.Cluster, hooks: o.Hooks,
		metrics: o.Metrics, started: time.Now().UTC(), addr: s.Addr}
	login := &signIn{edge: s.edge, token: o.Token, ttl: ttl, signins: s.signins, codes: s.codes, failed: s.failed, addr: s.Addr}
	sess := &sessions{edge: s.edge, svc: svc}
	conv := &conversation{edge: s.edge, svc: svc}
	evs := &events{edge: s.edge, svc: svc, pingInterval: pingInterval, writeTimeout: s.writeTimeout(), signedOut: s.signInEnded}
	ask := &asks{edge: s.edge, svc: svc}
	work := &workspace{edge: s.edge, svc: svc}
	pages := newUI(s.edge)
	creds := &credentials{edge: s.edge, store: o.Credentials}

	s.handle("GET /v1/health", daemon.handleHealth)
	s.handle("GET /v1/openapi.json", daemon.handleOpenAPI)
	s.handle("POST /v1/login", login.handleLogin)
	s.handle("POST /v1/logout", login.handleLogout)
	s.handle("POST /v1/login/codes", login.handleLoginCode)
	s.handle("GET /v1/agents", daemon.handleAgents)
	s.handle("POST /v1/agents/{name}/install", daemon.handleInstallAgent)
	s.handle("POST /v1/sessions", sess.handleCreateSession)
	s.handle("GET /v1/sessions", sess.handleListSessions)
	s.handle("GET /v1/sessions/{id}", sess.handleGetSession)
	s.handle("PATCH /v1/sessions/{id}", sess.handlePatchSession)
	s.handle("POST /v1/sessions/{id}/stop", sess.handleStopSession)
	s.handle("DELETE /v1/sessions/{id}", sess.handleDeleteSession)
	s.handle("POST /v1/sessions/{id}/prompts", conv.handlePrompt)
	s.handle("POST /v1/sessions/{id}/cancel", conv.handleCancel)
	s.handle("GET /v1/sessions/{id}/turns/{turn}", conv.handleWaitTurn)
	s.handle("GET /v1/sessions/{id}/events", evs.handleListEvents)
	s.handle("GET /v1/sessions/{id}/events/stream", evs.handleStreamEvents)
	s.handle("GET /v1/events/stream", evs.handleStreamChanges)
	s.handle("GET /v1/sessions/{id}/transcript", evs.handleTranscript)
	s.handle("GET /v1/sessions/{id}/queue", conv.handleListQueue)
	s.handle("DELETE /v1/sessions/{id}/queue/{entry}", conv.handleCancelQueueEntry)
	s.handle("GET /v1/sessions/{id}/permissions", ask.handleListPermissions)
	s.handle("POST /v1/sessions/{id}/permissions/{perm}", ask.handleDecidePermission)
	s.handle("GET /v1/sessions/{id}/elicitations", ask.handleListElicitations)
	s.handle("GET /v1/sessions/{id}/elicitations/{eid}", ask.handleGetElicitation)
	s.handle("POST /v1/sessions/{id}/elicitations/{eid}", ask.handleAnswerElicitation)
	s.handle("POST /v1/sessions/{id}/resume", sess.handleResume)
	s.handle("POST /v1/sessions/{id}/exec", work.handleExec)
	s.handle("POST /v1/sessions/{id}/snapshots", work.handleCreateSnapshot)
	s.handle("GET /v1/sessions/{id}/snapshots", work.handleListSnapshots)
	s.handle("POST /v1/sessions/{id}/repair", sess.handleRepair)
	s.handle("POST /v1/sessions/{id}/authenticate", conv.handleAuthenticate)
	s.handle("POST /v1/sessions/{id}/clear", conv.handleClear)
	s.handle("GET /v1/sessions/{id}/checkpoints", work.handleListCheckpoints)
	s.handle("POST /v1/sessions/{id}/rewind", work.handleRewind)
	s.handle("POST /v1/sessions/{id}/fork", work.handleFork)
	s.handle("GET /v1/hooks", daemon.handleListHooks)
	s.handle("GET /v1/hooks/deliveries", daemon.handleListHookDeliveries)
	s.handle("POST /v1/sessions/{id}/children", sess.handleSpawnChild)
	s.handle("GET /v1/sessions/{id}/children", sess.handleListChildren)
	s.handle("GET /v1/nodes", daemon.handleListNodes)
	s.handle("GET /v1/credentials", creds.handleList)
	s.handle("PUT /v1/credentials/{name}", creds.handlePut)
	s.handle("DELETE /v1/credentials/{name}", creds.handleDelete)
	s.handle("GET /metrics", daemon.handleMetrics)
	s.handle("GET /{$}", pages.handlePage)
	s.handle("GET /login", pages.handlePage)
	s.handle("GET /credentials", pages.handlePage)
	s.handle("GET /sessions/{id}", pages.handlePage)
	s.handle("GET "+uiPrefix, pages.handleFile)
}

// handle registers a route on the mux and remembers its pattern.
func (s *Server) handle(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	if reading := s.opts.Reading; reading != nil && shortRead(pattern) {
		next := h
		h = func(w http.ResponseWriter, r *http.Request) {
			done := reading()
			defer done()
			next(w, r)
		}
	}
	s.mux.HandleFunc(pattern, h)
}

// shortRead reports whether a route's pattern is a read that answers
// at once: a GET that neither streams nor waits for a turn.
func shortRead(pattern string) bool {
	method, path, _ := strings.Cut(pattern, " ")
	return method == http.MethodGet && !strings.HasSuffix(path, "/stream") && !strings.Contains(path, "/turns/")
}

// APIRoutes lists the API's routes as "METHOD /path" patterns: those under
// /v1 and /metrics (the UI's pages are not the API).
func (s *Server) APIRoutes() []string {
	var out []string
	for _, p := range s.patterns {
		_, path, _ := strings.Cut(p, " ")
		if apiPath(path) {
			out = append(out, p)
		}
	}
	return out
}

// route dispatches to the mux, answering unknown routes with a JSON 404 and
// known paths with the wrong method with a JSON 405 (the mux's own answers
// are plain text).
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	// The mux's fallback handler is either NotFound or a 405 that sets Allow:
	// run it on a scratch writer to learn which.
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		allow := probe.header.Get("Allow")
		w.Header().Set("Allow", allow)
		s.writeErrorStatus(w, r, &berth.Error{Code: berth.EInvalid,
			Message: "method " + r.Method + " is not allowed on " + logPath(r.URL.Path),
			Details: map[string]any{"allow": strings.Split(allow, ", ")}}, http.StatusMethodNotAllowed)
		return
	}
	s.writeError(w, r, berth.Errorf(berth.ENotFound, "no route for %s %s", r.Method, logPath(r.URL.Path)))
}

// statusProbe is a ResponseWriter that keeps the status and headers and
// discards the body.
type statusProbe struct {
	header http.Header
	status int
}

// Header returns the probe's headers.
func (p *statusProbe) Header() http.Header { return p.header }

// Write discards b.
func (p *statusProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}

// WriteHeader records code.
func (p *statusProbe) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
