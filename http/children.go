package http

import (
	"context"
	"net/http"
	"net/url"

	"github.com/berth-sh/berth"
)

// handleSpawnChild answers POST /v1/sessions/{id}/children with 201 and the
// child (CONTRACT §4.4); a retry with the same Idempotency-Key answers the
// same child.
func (s *Server) handleSpawnChild(w http.ResponseWriter, r *http.Request) {
	var req berth.CreateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.TTLSeconds == 0 {
		s.writeError(w, r, &berth.Error{Code: berth.EInvalid, Message: `field "ttl_seconds" is required for a child session`,
			Details: map[string]any{"field": "ttl_seconds"}})
		return
	}
	if err := req.ValidateTimes(); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Prompt != "" {
		first := berth.PromptRequest{Text: req.Prompt}
		if err := first.Validate(s.maxPromptBytes()); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	sess, err := s.svc.SpawnChild(r.Context(), r.PathValue("id"), req, r.Header.Get("Idempotency-Key"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/sessions/"+url.PathEscape(sess.ID))
	writeJSON(w, http.StatusCreated, sess)
}

// handleListChildren answers GET /v1/sessions/{id}/children with every
// child of the session, newest first; 404 for an unknown session.
func (s *Server) handleListChildren(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.svc.GetSession(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	kids, err := allChildren(r.Context(), s.svc, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, berth.SessionPage{Sessions: kids})
}

// allChildren reads every page of a session's children.
func allChildren(ctx context.Context, svc berth.SessionService, id string) ([]*berth.Session, error) {
	out := []*berth.Session{}
	f := berth.SessionFilter{Parent: id, Limit: 1000}
	for {
		page, err := svc.ListSessions(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Sessions...)
		if page.NextCursor == "" || len(page.Sessions) == 0 {
			return out, nil
		}
		f.Cursor = page.NextCursor
	}
}
