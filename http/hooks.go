package http

import (
	"net/http"
	"strconv"

	"github.com/berth-sh/berth"
)

// hookList is the answer of GET /v1/hooks.
type hookList struct {
	Hooks []berth.HookInfo `json:"hooks"`
}

// handleListHooks serves GET /v1/hooks: the configured hooks, without
// their secrets, URL paths or command arguments.
func (h *daemonInfo) handleListHooks(w http.ResponseWriter, r *http.Request) {
	out := hookList{Hooks: []berth.HookInfo{}}
	if h.hooks != nil {
		out.Hooks = append(out.Hooks, h.hooks.Hooks()...)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleListHookDeliveries serves GET /v1/hooks/deliveries
// ?state=pending|failed|delivered&session=&limit=&cursor=.
func (h *daemonInfo) handleListHookDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := berth.HookDeliveryFilter{State: q.Get("state"), SessionID: q.Get("session"), Cursor: q.Get("cursor")}
	switch f.State {
	case "", berth.DeliveryPending, berth.DeliveryFailed, berth.DeliveryDelivered:
	default:
		h.writeError(w, r, &berth.Error{Code: berth.EInvalid,
			Message: "query parameter \"state\" must be one of pending, failed, delivered, not " + strconv.Quote(f.State),
			Details: map[string]any{"parameter": "state"}})
		return
	}
	limit, err := queryInt(q, "limit", 0, 0)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	f.Limit = int(limit)
	page := &berth.HookDeliveryPage{}
	if h.hooks != nil {
		if page, err = h.hooks.ListDeliveries(r.Context(), f); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	page.Deliveries = orEmpty(page.Deliveries)
	writeJSON(w, http.StatusOK, page)
}
