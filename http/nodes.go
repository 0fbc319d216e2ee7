package http

import (
	"context"
	"net/http"
	"time"

	"github.com/berth-sh/berth"
)

// nodeList is the answer of GET /v1/nodes.
type nodeList struct {
	Nodes []*berth.Node `json:"nodes"`
}

// handleListNodes answers GET /v1/nodes (docs/api.md, Nodes): the nodes of
// the cluster, or this daemon alone when it is not in one.
func (h *daemonInfo) handleListNodes(w http.ResponseWriter, r *http.Request) {
	var nodes []*berth.Node
	var err error
	if h.cluster != nil {
		nodes, err = h.cluster.Nodes(r.Context())
	} else {
		var n *berth.Node
		if n, err = h.thisNode(r.Context()); err == nil {
			nodes = []*berth.Node{n}
		}
	}
	h.reply(w, r, http.StatusOK, nodeList{Nodes: orEmpty(nodes)}, err)
}

// thisNode describes a daemon that is the only node of its store: up, with
// a heartbeat of now, reached at its listen address, driving its live
// sessions.
func (h *daemonInfo) thisNode(ctx context.Context) (*berth.Node, error) {
	health, err := h.svc.Health(ctx)
	if err != nil {
		return nil, err
	}
	live, err := h.liveSessions(ctx)
	if err != nil {
		return nil, err
	}
	n := &berth.Node{ID: health.NodeID, State: berth.NodeUp, StartedAt: h.started,
		LastHeartbeat: time.Now().UTC(), Sessions: live}
	if addr := h.addr(); addr != "" {
		n.Advertise = "http://" + addr
	}
	return n, nil
}

// liveSessions counts the sessions that are not stopped.
func (h *daemonInfo) liveSessions(ctx context.Context) (int, error) {
	n := 0
	for _, st := range []berth.State{berth.StateStarting, berth.StateActive, berth.StateStopping} {
		err := eachSessionPage(ctx, h.svc, berth.SessionFilter{State: st}, func(page []*berth.Session) { n += len(page) })
		if err != nil {
			return 0, err
		}
	}
	return n, nil
}
