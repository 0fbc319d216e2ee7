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
func (s *Server) handleListHooks(w http.ResponseWriter, r *http.Request) {
	out := hookList{Hooks: []berth.HookInfo{}}
	if s.opts.Hooks != nil {
		out.Hooks = append(out.Hooks, s.opts.Hooks.Hooks()...)
	}
	writeJSON(w, http.StatusOK, out)
}

// handleListHookDeliveries serves GET /v1/hooks/deliveries
// ?state=pending|failed|delivered&session=&limit=&cursor=.
func (s *Server) handleListHookDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := berth.HookDeliveryFilter{State: q.Get("state"), SessionID: q.Get("session"), Cursor: q.Get("cursor")}
	switch f.State {
	case "", berth.DeliveryPending, berth.DeliveryFailed, berth.DeliveryDelivered:
	default:
		s.writeError(w, r, &berth.Error{Code: berth.EInvalid,
			Message: "query parameter \"state\" must be one of pending, failed, delivered, not " + strconv.Quote(f.State),
			Details: map[string]any{"parameter": "state"}})
		return
	}
	limit, err := queryInt(q, "limit", 0, 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = int(limit)
	page := &berth.HookDeliveryPage{}
	if s.opts.Hooks != nil {
		if page, err = s.opts.Hooks.ListDeliveries(r.Context(), f); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if page.Deliveries == nil {
		page.Deliveries = []*berth.HookDelivery{}
	}
	writeJSON(w, http.StatusOK, page)
}
