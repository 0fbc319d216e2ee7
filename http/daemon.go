package http

import (
	"context"
	"net/http"
	"time"

	"github.com/berth-sh/berth"
)

// daemonService is what the routes about the daemon itself call.
type daemonService interface {
	sessionLister
	Health(ctx context.Context) (*berth.Health, error)
	Agents(ctx context.Context) ([]berth.AgentInfo, error)
	InstallAgent(ctx context.Context, name string) (berth.AgentInfo, error)
}

// daemonInfo serves what the API says of the daemon rather than of one
// session: its health and agents, the cluster's nodes (nodes.go), the hooks
// (hooks.go), the metrics (metrics.go) and the OpenAPI document
// (openapi.go).
type daemonInfo struct {
	*edge
	svc daemonService
	// version fills the health answer's version when the service leaves
	// it empty.
	version string
	// cluster, hooks and metrics are ServerOptions' (nil when absent).
	cluster Cluster
	hooks   berth.HookService
	metrics http.Handler
	// started is when the server was made (GET /v1/nodes of one node).
	started time.Time
	// addr is the bound TCP address (Server.Addr).
	addr func() string
}

// handleHealth answers GET /v1/health.
func (h *daemonInfo) handleHealth(w http.ResponseWriter, r *http.Request) {
	health, err := h.svc.Health(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if health.Version == "" {
		health.Version = h.version
	}
	if health.Status == "" {
		health.Status = "ok"
	}
	writeJSON(w, http.StatusOK, health)
}

// agentList is the answer of GET /v1/agents.
type agentList struct {
	Agents []berth.AgentInfo `json:"agents"`
}

// handleInstallAgent answers POST /v1/agents/{name}/install: it returns
// once npm is done (a few seconds to minutes).
func (h *daemonInfo) handleInstallAgent(w http.ResponseWriter, r *http.Request) {
	info, err := h.svc.InstallAgent(r.Context(), r.PathValue("name"))
	h.reply(w, r, http.StatusOK, info, err)
}

// handleAgents answers GET /v1/agents.
func (h *daemonInfo) handleAgents(w http.ResponseWriter, r *http.Request) {
	agents, err := h.svc.Agents(r.Context())
	h.reply(w, r, http.StatusOK, agentList{Agents: orEmpty(agents)}, err)
}
