package http

import (
	"context"
	"net/http"

	"github.com/berth-sh/berth"
)

// handlePatchSession answers PATCH /v1/sessions/{id} (CONTRACT §4.7) with
// the changed session.
func (s *Server) handlePatchSession(w http.ResponseWriter, r *http.Request) {
	var p berth.SessionPatch
	if err := s.decodeJSON(w, r, &p); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.svc.PatchSession(r.Context(), r.PathValue("id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// PatchSession changes a session's name, labels, mode, model or config.
func (c *Client) PatchSession(ctx context.Context, id string, p berth.SessionPatch) (*berth.Session, error) {
	var s berth.Session
	if err := c.Do(ctx, http.MethodPatch, sessionPath(id, ""), nil, p, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
