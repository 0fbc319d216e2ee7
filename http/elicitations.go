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
func (s *Server) handleListElicitations(w http.ResponseWriter, r *http.Request) {
	es, err := s.svc.ListElicitations(r.Context(), r.PathValue("id"), r.URL.Query().Get("state"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if es == nil {
		es = []*berth.Elicitation{}
	}
	writeJSON(w, http.StatusOK, elicitationList{Elicitations: es})
}

// handleGetElicitation answers GET /v1/sessions/{id}/elicitations/{eid}.
func (s *Server) handleGetElicitation(w http.ResponseWriter, r *http.Request) {
	e, err := s.svc.GetElicitation(r.Context(), r.PathValue("id"), r.PathValue("eid"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// handleAnswerElicitation answers POST /v1/sessions/{id}/elicitations/{eid}.
func (s *Server) handleAnswerElicitation(w http.ResponseWriter, r *http.Request) {
	var a berth.ElicitationAnswer
	if err := s.decodeJSON(w, r, &a); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := a.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := s.svc.AnswerElicitation(r.Context(), r.PathValue("id"), r.PathValue("eid"), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}
