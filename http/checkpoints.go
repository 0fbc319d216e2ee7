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
	callWithBody(h.edge, w, r, http.StatusOK, h.svc.Rewind)
}

// handleFork answers POST /v1/sessions/{id}/fork with 201 and the new
// session.
func (h *workspace) handleFork(w http.ResponseWriter, r *http.Request) {
	callWithBody(h.edge, w, r, http.StatusCreated, h.svc.Fork)
}
