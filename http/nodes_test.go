package http

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-sh/berth"
)

func TestNodesOfOneDaemon(t *testing.T) {
	f := newFakeService()
	f.sessions["ses_2"] = &berth.Session{ID: "ses_2", Agent: "demo", State: berth.StateStopped, CreatedAt: time.Unix(200, 0).UTC()}
	f.sessions["ses_3"] = &berth.Session{ID: "ses_3", Agent: "demo", State: berth.StateStarting, CreatedAt: time.Unix(300, 0).UTC()}
	s := startServer(t, f, ServerOptions{Token: "token-a"}, "")
	before := time.Now().UTC().Add(-time.Second)
	st, raw, _ := send(t, s, "GET", "/v1/nodes", "", "Authorization", "Bearer token-a")
	var out struct{ Nodes []*berth.Node }
	if st != 200 || json.Unmarshal(raw, &out) != nil || len(out.Nodes) != 1 {
		t.Fatalf("GET /v1/nodes: %d %s", st, raw)
	}
	n := out.Nodes[0]
	if n.ID != "node_1" || n.State != berth.NodeUp || n.Advertise != "http://"+s.Addr() || n.Sessions != 2 || n.LastHeartbeat.Before(before) {
		t.Fatalf("this node: %+v (raw %s)", n, raw)
	}
	// Like every route, it needs the token.
	if st, _, _ := send(t, s, "GET", "/v1/nodes", ""); st != 401 {
		t.Fatalf("without a token: %d", st)
	}
}

func TestNodesOfACluster(t *testing.T) {
	c := newFakeCluster()
	hb := time.Date(2026, 11, 26, 1, 2, 3, 0, time.UTC)
	c.nodes = []*berth.Node{
		{ID: "a", Advertise: "http://10.0.0.1:7380", State: berth.NodeUp, StartedAt: hb, LastHeartbeat: hb, Sessions: 3},
		{ID: "b", Advertise: "http://10.0.0.2:7380", State: berth.NodeLost, StartedAt: hb, LastHeartbeat: hb},
	}
	h := NewServer(newFakeService(), ServerOptions{Cluster: c.clusterOf("a")}).Handler()
	st, body, _ := call(t, h, "GET", "/v1/nodes", "")
	nodes, _ := body["nodes"].([]any)
	if st != 200 || len(nodes) != 2 {
		t.Fatalf("GET /v1/nodes: %d %v", st, body)
	}
	b := nodes[1].(map[string]any)
	if b["id"] != "b" || b["state"] != "lost" || b["sessions"] != float64(0) || b["advertise"] != "http://10.0.0.2:7380" ||
		b["last_heartbeat"] != "2026-11-26T01:02:03Z" {
		t.Fatalf("node b: %v", b)
	}
}
