package http

import (
	"context"
	"net/http"

	"github.com/berth-sh/berth"
)

// handleWaitTurn answers GET /v1/sessions/{id}/turns/{turn} with 200 and
// the turn's result once it has ended (a long poll, like ?wait=true on a
// prompt): {turn_id} is a turn id, or the entry id of a queued or staged
// prompt, whose turn is waited for once it runs. It is
// berth.SessionService.WaitTurn on the wire.
func (h *conversation) handleWaitTurn(w http.ResponseWriter, r *http.Request) {
	h.waitTurn(w, r, r.PathValue("id"), r.PathValue("turn"))
}

// waitTurn waits for the turn target of session id to end, or for the
// request or the daemon to, and answers its result.
func (h *conversation) waitTurn(w http.ResponseWriter, r *http.Request, id, target string) {
	ctx, cancel := h.requestContext(r)
	defer cancel()
	turn, err := h.svc.WaitTurn(ctx, id, target)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeTurnResult(ctx, w, turn)
}

// writeTurnResult answers 200 with a finished turn; its text (which may be
// long) is escaped straight to the client.
func writeTurnResult(ctx context.Context, w http.ResponseWriter, turn *berth.TurnResult) {
	out := *turn
	out.Text, out.Long = "", nil
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if turn.Long != nil {
		// A failed read or write ends the answer early: the client is
		// gone, or sees it cut.
		_ = encodeWithLong(ctx, w, &out, turn.Long)
		return
	}
	_ = encodeWithText(w, &out, turn.Text)
}
