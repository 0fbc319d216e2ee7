package http

import (
	"context"
	"net/http"

	"github.com/berth-sh/berth"
)

// askService is what the routes of an agent's requests to its user call:
// permissions and elicitations.
type askService interface {
	ListPermissions(ctx context.Context, id, state string) ([]*berth.Permission, error)
	DecidePermission(ctx context.Context, id, permID string, d berth.PermissionDecision) (*berth.Permission, error)
	ListElicitations(ctx context.Context, id, state string) ([]*berth.Elicitation, error)
	GetElicitation(ctx context.Context, id, eid string) (*berth.Elicitation, error)
	AnswerElicitation(ctx context.Context, id, eid string, a berth.ElicitationAnswer) (*berth.Elicitation, error)
}

// asks serves what an agent asks of its user and waits on: permissions
// (docs/api.md, Permissions) and elicitations (elicitations.go).
type asks struct {
	*edge
	svc askService
}

// permissionList is the answer of GET /v1/sessions/{id}/permissions.
type permissionList struct {
	Permissions []*berth.Permission `json:"permissions"`
}

// handleListPermissions answers GET /v1/sessions/{id}/permissions?state=.
func (h *asks) handleListPermissions(w http.ResponseWriter, r *http.Request) {
	ps, err := h.svc.ListPermissions(r.Context(), r.PathValue("id"), r.URL.Query().Get("state"))
	h.reply(w, r, http.StatusOK, permissionList{Permissions: orEmpty(ps)}, err)
}

// handleDecidePermission answers POST /v1/sessions/{id}/permissions/{perm}.
func (h *asks) handleDecidePermission(w http.ResponseWriter, r *http.Request) {
	var d berth.PermissionDecision
	if !h.readJSON(w, r, &d) {
		return
	}
	if err := d.Validate(); err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := h.svc.DecidePermission(r.Context(), r.PathValue("id"), r.PathValue("perm"), d)
	h.reply(w, r, http.StatusOK, p, err)
}
