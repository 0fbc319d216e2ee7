package http

import (
	"net/http"
)

// handleWaitTurn answers GET /v1/sessions/{id}/turns/{turn} with 200 and
// the turn's result once it has ended (a long poll, like ?wait=true on a
// prompt): {turn_id} is a turn id, or the entry id of a queued or staged
// prompt, whose turn is waited for once it runs. It is
// berth.SessionService.WaitTurn on the wire.
func (s *Server) handleWaitTurn(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	turn, err := s.svc.WaitTurn(ctx, r.PathValue("id"), r.PathValue("turn"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The turn's text (which may be long) is escaped straight to the client.
	out := *turn
	out.Text = ""
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = encodeWithText(w, &out, turn.Text)
}
