package http

import (
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// AuthenticateRequest is the body of POST /v1/sessions/{id}/authenticate.
type AuthenticateRequest struct {
	MethodID string `json:"method_id"`
}

// handleAuthenticate answers POST /v1/sessions/{id}/authenticate with the
// session: active once a session that waited for it has started.
func (s *Server) handleAuthenticate(w http.ResponseWriter, r *http.Request) {
	var req AuthenticateRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if strings.TrimSpace(req.MethodID) == "" {
		s.writeError(w, r, berth.Errorf(berth.EInvalid, "method_id is required"))
		return
	}
	sess, err := s.svc.Authenticate(r.Context(), r.PathValue("id"), req.MethodID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// handleClear answers POST /v1/sessions/{id}/clear?cancel= with the
// session and its new conversation. It takes no body.
func (s *Server) handleClear(w http.ResponseWriter, r *http.Request) {
	cancel, err := queryBool(r.URL.Query(), "cancel")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sess, err := s.svc.ClearSession(r.Context(), r.PathValue("id"), cancel)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}
