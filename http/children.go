package http

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// handleSpawnChild answers POST /v1/sessions/{id}/children with 201 and the
// child (docs/api.md, Children); a retry with the same Idempotency-Key
// answers the same child.
func (h *sessions) handleSpawnChild(w http.ResponseWriter, r *http.Request) {
	var req berth.CreateRequest
	if !h.readJSON(w, r, &req) {
		return
	}
	if req.TTLSeconds == 0 {
		h.writeError(w, r, &berth.Error{Code: berth.EInvalid, Message: `field "ttl_seconds" is required for a child session`,
			Details: map[string]any{"field": "ttl_seconds"}})
		return
	}
	if err := h.checkCreate(&req); err != nil {
		h.writeError(w, r, err)
		return
	}
	sess, err := h.svc.SpawnChild(r.Context(), r.PathValue("id"), req, r.Header.Get("Idempotency-Key"))
	h.created(w, r, sess, err)
}

// handleListChildren answers GET /v1/sessions/{id}/children with every
// child of the session, newest first; 404 for an unknown session.
func (h *sessions) handleListChildren(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.svc.GetSession(r.Context(), id); err != nil {
		h.writeError(w, r, err)
		return
	}
	kids := []*berth.Session{}
	err := eachSessionPage(r.Context(), h.svc, berth.SessionFilter{Parent: id}, func(page []*berth.Session) {
		kids = append(kids, page...)
	})
	h.reply(w, r, http.StatusOK, berth.SessionPage{Sessions: kids}, err)
}
