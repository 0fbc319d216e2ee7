package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// A daemon on SQLite is its store's only node: `berth nodes` shows it, up,
// at its listen address, with its live sessions; -o json is the API's
// answer.
func TestNodesCommandOfOneDaemon(t *testing.T) {
	s := startServer(t, t.TempDir())
	sess := s.create(t, nil)
	var h berth.Health
	if st, _ := s.api("GET", "/v1/health", nil, &h); st != 200 || h.NodeID == "" {
		t.Fatalf("health = %d %+v", st, h)
	}
	out := s.cli(t, "nodes")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NODE") {
		t.Fatalf("berth nodes:\n%s", out)
	}
	fields := strings.Fields(lines[1])
	if len(fields) < 5 || fields[0] != h.NodeID || fields[1] != "up" || fields[2] != "1" || fields[len(fields)-1] != "http://"+s.addr {
		t.Fatalf("berth nodes row %q (node %s, addr %s)", lines[1], h.NodeID, s.addr)
	}
	var list struct {
		Nodes []berth.Node `json:"nodes"`
	}
	out = s.cli(t, "nodes", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Nodes) != 1 || list.Nodes[0].ID != h.NodeID || list.Nodes[0].Sessions != 1 {
		t.Fatalf("berth nodes -o json = %s (%v)", out, err)
	}
	if st, _ := s.api("POST", "/v1/sessions/"+sess.ID+"/stop", nil, nil); st != 200 {
		t.Fatalf("stop = %d", st)
	}
	if err := json.Unmarshal([]byte(s.cli(t, "nodes", "-o", "json")), &list); err != nil || list.Nodes[0].Sessions != 0 {
		t.Fatalf("after the stop: %+v (%v)", list.Nodes, err)
	}
}
