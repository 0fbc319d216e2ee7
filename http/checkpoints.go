package http

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// checkpointList is the answer of GET /v1/sessions/{id}/checkpoints.
type checkpointList struct {
	Checkpoints []*berth.Checkpoint `json:"checkpoints"`
}

// handleListCheckpoints answers GET /v1/sessions/{id}/checkpoints.
func (s *Server) handleListCheckpoints(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.ListCheckpoints(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if list == nil {
		list = []*berth.Checkpoint{}
	}
	writeJSON(w, http.StatusOK, checkpointList{Checkpoints: list})
}

// handleRewind answers POST /v1/sessions/{id}/rewind with the session.
func (s *Server) handleRewind(w http.ResponseWriter, r *http.Request) {
	var req berth.RewindRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.svc.Rewind(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// handleFork answers POST /v1/sessions/{id}/fork with 201 and the new
// session.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	var req berth.ForkRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.svc.Fork(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, sess)
}
