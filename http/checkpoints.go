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
func (h *workspace) handleListCheckpoints(w http.ResponseWriter, r *http.Request) {
	list, err := h.svc.ListCheckpoints(r.Context(), r.PathValue("id"))
	h.reply(w, r, http.StatusOK, checkpointList{Checkpoints: orEmpty(list)}, err)
}

// handleRewind answers POST /v1/sessions/{id}/rewind with the session.
func (h *workspace) handleRewind(w http.ResponseWriter, r *http.Request) {
	var req berth.RewindRequest
	if !h.readJSON(w, r, &req) {
		return
	}
	sess, err := h.svc.Rewind(r.Context(), r.PathValue("id"), req)
	h.reply(w, r, http.StatusOK, sess, err)
}

// handleFork answers POST /v1/sessions/{id}/fork with 201 and the new
// session.
func (h *workspace) handleFork(w http.ResponseWriter, r *http.Request) {
	var req berth.ForkRequest
	if !h.readJSON(w, r, &req) {
		return
	}
	sess, err := h.svc.Fork(r.Context(), r.PathValue("id"), req)
	h.reply(w, r, http.StatusCreated, sess, err)
}
