package http

import (
	"net/http"

	"github.com/berth-sh/berth"
)

// handlePrompt answers POST /v1/sessions/{id}/prompts: 202 with the prompt
// result, or, with ?wait=true, 200 with the turn's result once it ends.
func (h *conversation) handlePrompt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, err := queryBool(r.URL.Query(), "wait")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var req berth.PromptRequest
	if !h.readJSON(w, r, &req) {
		return
	}
	// Refuse at the edge what the service would refuse, before it is sent on.
	if err := req.Validate(h.maxPrompt); err != nil {
		h.writeError(w, r, err)
		return
	}
	res, err := h.svc.Prompt(r.Context(), id, req)
	if err != nil {
		h.writeError(w, r, err)
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
	h.waitTurn(w, r, id, target)
}

// cancelResult is the answer of POST /v1/sessions/{id}/cancel.
type cancelResult struct {
	TurnID string `json:"turn_id"`
}

// handleCancel answers POST /v1/sessions/{id}/cancel with 202 and the id of
// the turn being cancelled.
func (h *conversation) handleCancel(w http.ResponseWriter, r *http.Request) {
	turnID, err := h.svc.Cancel(r.Context(), r.PathValue("id"))
	h.reply(w, r, http.StatusAccepted, cancelResult{TurnID: turnID}, err)
}
