package http

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-sh/berth"
)

// handleHealth answers GET /v1/health.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h, err := s.svc.Health(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if h.Version == "" {
		h.Version = s.opts.Version
	}
	if h.Status == "" {
		h.Status = "ok"
	}
	writeJSON(w, http.StatusOK, h)
}

// agentList is the answer of GET /v1/agents.
type agentList struct {
	Agents []berth.AgentInfo `json:"agents"`
}

// handleAgents answers GET /v1/agents.
func (s *Server) handleAgents(w http.ResponseWriter, r *http.Request) {
	agents, err := s.svc.Agents(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if agents == nil {
		agents = []berth.AgentInfo{}
	}
	writeJSON(w, http.StatusOK, agentList{Agents: agents})
}

// handleCreateSession answers POST /v1/sessions with 201 and the session,
// which may be stopped/startup_failed when the agent failed its handshake.
func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req berth.CreateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if strings.TrimSpace(req.Agent) == "" {
		s.writeError(w, r, &berth.Error{Code: berth.EInvalid, Message: `field "agent" is required`,
			Details: map[string]any{"field": "agent"}})
		return
	}
	if err := req.ValidateTimes(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Prompt != "" {
		// The first prompt obeys the same cap as any other.
		first := berth.PromptRequest{Text: req.Prompt}
		if err := first.Validate(s.maxPromptBytes()); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	sess, err := s.svc.CreateSession(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+url.PathEscape(sess.ID))
	writeJSON(w, http.StatusCreated, sess)
}

// handleListSessions answers GET /v1/sessions with a page of sessions.
func (s *Server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	f, err := sessionFilter(r.URL.Query())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.svc.ListSessions(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if page == nil {
		page = &berth.SessionPage{}
	}
	if page.Sessions == nil {
		page.Sessions = []*berth.Session{}
	}
	writeJSON(w, http.StatusOK, page)
}

// sessionFilter parses ?state=&agent=&parent=&root=&label=k=v (repeatable)
// &limit=&cursor=.
func sessionFilter(q url.Values) (berth.SessionFilter, error) {
	f := berth.SessionFilter{
		State:  berth.State(q.Get("state")),
		Agent:  q.Get("agent"),
		Parent: q.Get("parent"),
		Root:   q.Get("root"),
		Cursor: q.Get("cursor"),
	}
	switch f.State {
	case "", berth.StateStarting, berth.StateActive, berth.StateStopping, berth.StateStopped:
	default:
		return f, &berth.Error{Code: berth.EInvalid,
			Message: fmt.Sprintf("query parameter \"state\" must be one of starting, active, stopping, stopped, not %q", f.State),
			Details: map[string]any{"parameter": "state"}}
	}
	limit, err := queryInt(q, "limit", 0, 0)
	if err != nil {
		return f, err
	}
	f.Limit = int(limit)
	for _, kv := range q["label"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return f, &berth.Error{Code: berth.EInvalid,
				Message: fmt.Sprintf("query parameter \"label\" must be key=value, not %q", kv),
				Details: map[string]any{"parameter": "label"}}
		}
		if f.Labels == nil {
			f.Labels = map[string]string{}
		}
		f.Labels[k] = v
	}
	return f, nil
}

// handleGetSession answers GET /v1/sessions/{id}.
func (s *Server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.svc.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// handleStopSession answers POST /v1/sessions/{id}/stop with the stopped
// session (stopping a stopped session is not an error).
func (s *Server) handleStopSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.svc.StopSession(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// handleDeleteSession answers DELETE /v1/sessions/{id} with 204.
func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.svc.DeleteSession(r.Context(), r.PathValue("id")); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
