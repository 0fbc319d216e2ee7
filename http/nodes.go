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

// handleListNodes answers GET /v1/nodes (CONTRACT §4.11): the nodes of the
// cluster, or this daemon alone when it is not in one.
func (s *Server) handleListNodes(w http.ResponseWriter, r *http.Request) {
	var nodes []*berth.Node
	var err error
	if s.opts.Cluster != nil {
		nodes, err = s.opts.Cluster.Nodes(r.Context())
	} else {
		var n *berth.Node
		if n, err = s.thisNode(r.Context()); err == nil {
			nodes = []*berth.Node{n}
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if nodes == nil {
		nodes = []*berth.Node{}
	}
	writeJSON(w, http.StatusOK, nodeList{Nodes: nodes})
}

// thisNode describes a daemon that is the only node of its store: up, with
// a heartbeat of now, reached at its listen address, driving its live
// sessions.
func (s *Server) thisNode(ctx context.Context) (*berth.Node, error) {
	h, err := s.svc.Health(ctx)
	if err != nil {
		return nil, err
	}
	live, err := s.liveSessions(ctx)
	if err != nil {
		return nil, err
	}
	n := &berth.Node{ID: h.NodeID, State: berth.NodeUp, StartedAt: s.started,
		LastHeartbeat: time.Now().UTC(), Sessions: live}
	if addr := s.Addr(); addr != "" {
		n.Advertise = "http://" + addr
	}
	return n, nil
}

// sessionPageMax is the largest page of sessions the stores return.
const sessionPageMax = 1000

// liveSessions counts the sessions that are not stopped.
func (s *Server) liveSessions(ctx context.Context) (int, error) {
	n := 0
	for _, st := range []berth.State{berth.StateStarting, berth.StateActive, berth.StateStopping} {
		f := berth.SessionFilter{State: st, Limit: sessionPageMax}
		for {
			page, err := s.svc.ListSessions(ctx, f)
			if err != nil {
				return 0, err
			}
			n += len(page.Sessions)
			if page.NextCursor == "" || len(page.Sessions) == 0 {
				break
			}
			f.Cursor = page.NextCursor
		}
	}
	return n, nil
}
