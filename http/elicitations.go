package http

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// elicitationList is the answer of GET /v1/sessions/{id}/elicitations.
type elicitationList struct {
	Elicitations []*berth.Elicitation `json:"elicitations"`
}

// handleListElicitations answers GET /v1/sessions/{id}/elicitations?state=.
func (h *asks) handleListElicitations(w http.ResponseWriter, r *http.Request) {
	es, err := h.svc.ListElicitations(r.Context(), r.PathValue("id"), r.URL.Query().Get("state"))
	h.reply(w, r, http.StatusOK, elicitationList{Elicitations: orEmpty(es)}, err)
}

// handleGetElicitation answers GET /v1/sessions/{id}/elicitations/{eid}.
func (h *asks) handleGetElicitation(w http.ResponseWriter, r *http.Request) {
	e, err := h.svc.GetElicitation(r.Context(), r.PathValue("id"), r.PathValue("eid"))
	h.reply(w, r, http.StatusOK, e, err)
}

// handleAnswerElicitation answers POST /v1/sessions/{id}/elicitations/{eid}.
func (h *asks) handleAnswerElicitation(w http.ResponseWriter, r *http.Request) {
	var a berth.ElicitationAnswer
	if !h.readJSON(w, r, &a) {
		return
	}
	if err := a.Validate(); err != nil {
		h.writeError(w, r, err)
		return
	}
	e, err := h.svc.AnswerElicitation(r.Context(), r.PathValue("id"), r.PathValue("eid"), a)
	h.reply(w, r, http.StatusOK, e, err)
}
