package http

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-sh/berth"
)

// sessionService is what the session routes call: a session's life from
// create to delete, its children and its repair (docs/api.md, Sessions).
type sessionService interface {
	sessionLister
	CreateSession(ctx context.Context, req berth.CreateRequest) (*berth.Session, error)
	SpawnChild(ctx context.Context, parentID string, req berth.CreateRequest, idemKey string) (*berth.Session, error)
	GetSession(ctx context.Context, id string) (*berth.Session, error)
	PatchSession(ctx context.Context, id string, p berth.SessionPatch) (*berth.Session, error)
	StopSession(ctx context.Context, id string) (*berth.Session, error)
	ResumeSession(ctx context.Context, id string) (*berth.Session, error)
	DeleteSession(ctx context.Context, id string) error
	Repair(ctx context.Context, id string, dryRun, force bool) (*berth.RepairReport, error)
}

// sessionLister pages the sessions a filter selects.
type sessionLister interface {
	ListSessions(ctx context.Context, f berth.SessionFilter) (*berth.SessionPage, error)
}

// sessions serves the routes of /v1/sessions and /v1/sessions/{id} that
// make, list, change, stop, resume, delete and repair sessions, children
// included (children.go).
type sessions struct {
	*edge
	svc sessionService
}

// handleCreateSession answers POST /v1/sessions with 201 and the session,
// which may be stopped/startup_failed when the agent failed its handshake.
func (h *sessions) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req berth.CreateRequest
	if !h.readJSON(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Agent) == "" {
		h.writeError(w, r, &berth.Error{Code: berth.EInvalid, Message: `field "agent" is required`,
			Details: map[string]any{"field": "agent"}})
		return
	}
	if err := h.checkCreate(&req); err != nil {
		h.writeError(w, r, err)
		return
	}
	sess, err := h.svc.CreateSession(r.Context(), req)
	h.created(w, r, sess, err)
}

// checkCreate refuses at the edge what the service would refuse in a
// create body, whichever route it came by: bad times, and a first prompt
// over the cap any other prompt obeys.
func (h *sessions) checkCreate(req *berth.CreateRequest) error {
	if err := req.ValidateTimes(); err != nil {
		return err
	}
	if err := req.ValidateBudget(); err != nil {
		return err
	}
	if req.Prompt == "" {
		return nil
	}
	first := berth.PromptRequest{Text: req.Prompt}
	return first.Validate(h.maxPrompt)
}

// created answers 201 with a new session and its Location, or err.
func (h *sessions) created(w http.ResponseWriter, r *http.Request, sess *berth.Session, err error) {
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+url.PathEscape(sess.ID))
	writeJSON(w, http.StatusCreated, sess)
}

// handleListSessions answers GET /v1/sessions with a page of sessions.
func (h *sessions) handleListSessions(w http.ResponseWriter, r *http.Request) {
	f, err := sessionFilter(r.URL.Query())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	page, err := h.svc.ListSessions(r.Context(), f)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if page == nil {
		page = &berth.SessionPage{}
	}
	page.Sessions = orEmpty(page.Sessions)
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

// sessionPageMax is the largest page of sessions the stores return.
const sessionPageMax = 1000

// eachSessionPage calls fn with every page of the sessions f selects.
func eachSessionPage(ctx context.Context, svc sessionLister, f berth.SessionFilter, fn func([]*berth.Session)) error {
	f.Limit = sessionPageMax
	for {
		page, err := svc.ListSessions(ctx, f)
		if err != nil {
			return err
		}
		fn(page.Sessions)
		if page.NextCursor == "" || len(page.Sessions) == 0 {
			return nil
		}
		f.Cursor = page.NextCursor
	}
}

// handleGetSession answers GET /v1/sessions/{id}.
func (h *sessions) handleGetSession(w http.ResponseWriter, r *http.Request) {
	sess, err := h.svc.GetSession(r.Context(), r.PathValue("id"))
	h.reply(w, r, http.StatusOK, sess, err)
}

// handlePatchSession answers PATCH /v1/sessions/{id} (docs/api.md, Agent
// controls) with the changed session.
func (h *sessions) handlePatchSession(w http.ResponseWriter, r *http.Request) {
	callWithBody(h.edge, w, r, http.StatusOK, h.svc.PatchSession)
}

// handleStopSession answers POST /v1/sessions/{id}/stop with the stopped
// session (stopping a stopped session is not an error).
func (h *sessions) handleStopSession(w http.ResponseWriter, r *http.Request) {
	sess, err := h.svc.StopSession(r.Context(), r.PathValue("id"))
	h.reply(w, r, http.StatusOK, sess, err)
}

// handleResume answers POST /v1/sessions/{id}/resume with the active session.
func (h *sessions) handleResume(w http.ResponseWriter, r *http.Request) {
	sess, err := h.svc.ResumeSession(r.Context(), r.PathValue("id"))
	h.reply(w, r, http.StatusOK, sess, err)
}

// handleDeleteSession answers DELETE /v1/sessions/{id} with 204.
func (h *sessions) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.DeleteSession(r.Context(), r.PathValue("id")); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleRepair answers POST /v1/sessions/{id}/repair?dry_run=&force=.
func (h *sessions) handleRepair(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dryRun, err := queryBool(q, "dry_run")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	force, err := queryBool(q, "force")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	rep, err := h.svc.Repair(r.Context(), r.PathValue("id"), dryRun, force)
	h.reply(w, r, http.StatusOK, rep, err)
}
