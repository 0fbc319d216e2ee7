package http

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// handlePrompt answers POST /v1/sessions/{id}/prompts: 202 with the prompt
// result, or, with ?wait=true, 200 with the turn's result once it ends.
func (s *Server) handlePrompt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, err := queryBool(r.URL.Query(), "wait")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req berth.PromptRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	// Refuse at the edge what the service would refuse, before it is sent on.
	if err := req.Validate(s.maxPromptBytes()); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.Prompt(r.Context(), id, req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// A queued or staged prompt has no turn yet: its entry id stands for it.
	target := res.TurnID
	if target == "" {
		target = res.EntryID
	}
	if !wait || target == "" {
		writeJSON(w, http.StatusAccepted, res)
		return
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	turn, err := s.svc.WaitTurn(ctx, id, target)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeTurnResult(ctx, w, turn)
}

// cancelResult is the answer of POST /v1/sessions/{id}/cancel.
type cancelResult struct {
	TurnID string `json:"turn_id"`
}

// handleCancel answers POST /v1/sessions/{id}/cancel with 202 and the id of
// the turn being cancelled.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	turnID, err := s.svc.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, cancelResult{TurnID: turnID})
}
