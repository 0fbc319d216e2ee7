package http

import (
	"context"
	"net/http"
	"net/url"

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

// ListElicitations returns a session's elicitations, all or in one state.
func (c *Client) ListElicitations(ctx context.Context, id, state string) ([]*berth.Elicitation, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	var res elicitationList
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/elicitations"), q, nil, &res); err != nil {
		return nil, err
	}
	return res.Elicitations, nil
}

// GetElicitation returns one elicitation of a session.
func (c *Client) GetElicitation(ctx context.Context, id, eid string) (*berth.Elicitation, error) {
	var e berth.Elicitation
	if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/elicitations/"+url.PathEscape(eid)), nil, nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// AnswerElicitation answers a pending elicitation.
func (c *Client) AnswerElicitation(ctx context.Context, id, eid string, a berth.ElicitationAnswer) (*berth.Elicitation, error) {
	var e berth.Elicitation
	if err := c.Do(ctx, http.MethodPost, sessionPath(id, "/elicitations/"+url.PathEscape(eid)), nil, a, &e); err != nil {
		return nil, err
	}
	return &e, nil
}
