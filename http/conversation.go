package http

import (
	"context"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
)

// conversationService is what the routes of a session's conversation call:
// its prompts and turns, its queue, its agent's sign-in and a fresh start.
type conversationService interface {
	Prompt(ctx context.Context, id string, req berth.PromptRequest) (*berth.PromptResult, error)
	WaitTurn(ctx context.Context, id, turnID string) (*berth.TurnResult, error)
	Cancel(ctx context.Context, id string) (string, error)
	ListQueue(ctx context.Context, id string) (*berth.QueueView, error)
	CancelQueueEntry(ctx context.Context, id, entryID string) error
	Authenticate(ctx context.Context, id, methodID string) (*berth.Session, error)
	ClearSession(ctx context.Context, id string, cancel bool) (*berth.Session, error)
}

// conversation serves a session's conversation with its agent: prompts
// (prompts.go), turns (turns.go), the queue (queue.go), authenticate and
// clear.
type conversation struct {
	*edge
	svc conversationService
}

// AuthenticateRequest is the body of POST /v1/sessions/{id}/authenticate.
type AuthenticateRequest struct {
	MethodID string `json:"method_id"`
}

// handleAuthenticate answers POST /v1/sessions/{id}/authenticate with the
// session: active once a session that waited for it has started.
func (h *conversation) handleAuthenticate(w http.ResponseWriter, r *http.Request) {
	var req AuthenticateRequest
	if !h.readJSON(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.MethodID) == "" {
		h.writeError(w, r, berth.Errorf(berth.EInvalid, "method_id is required"))
		return
	}
	sess, err := h.svc.Authenticate(r.Context(), r.PathValue("id"), req.MethodID)
	h.reply(w, r, http.StatusOK, sess, err)
}

// handleClear answers POST /v1/sessions/{id}/clear?cancel= with the
// session and its new conversation. It takes no body.
func (h *conversation) handleClear(w http.ResponseWriter, r *http.Request) {
	cancel, err := queryBool(r.URL.Query(), "cancel")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	sess, err := h.svc.ClearSession(r.Context(), r.PathValue("id"), cancel)
	h.reply(w, r, http.StatusOK, sess, err)
}
