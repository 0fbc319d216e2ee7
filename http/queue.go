package http

import "net/http"

// statusResult is a bare {"status"} answer.
type statusResult struct {
	Status string `json:"status"`
}

// handleListQueue answers GET /v1/sessions/{id}/queue.
func (h *conversation) handleListQueue(w http.ResponseWriter, r *http.Request) {
	q, err := h.svc.ListQueue(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q.Entries = orEmpty(q.Entries)
	writeJSON(w, http.StatusOK, q)
}

// handleCancelQueueEntry answers DELETE /v1/sessions/{id}/queue/{entry}.
func (h *conversation) handleCancelQueueEntry(w http.ResponseWriter, r *http.Request) {
	err := h.svc.CancelQueueEntry(r.Context(), r.PathValue("id"), r.PathValue("entry"))
	h.reply(w, r, http.StatusOK, statusResult{Status: "canceled"}, err)
}
