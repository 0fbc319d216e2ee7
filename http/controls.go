package http

import (
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
