package client

import (
	"context"
	"net/http"

	"github.com/berth-sh/berth"
)

// nodeList is the answer of GET /v1/nodes.
type nodeList struct {
	Nodes []*berth.Node `json:"nodes"`
}

// Nodes returns the nodes sharing the daemon's store, oldest first
// (docs/api.md, "Nodes"); a daemon that is not in a cluster is the only one.
func (c *Client) Nodes(ctx context.Context) ([]*berth.Node, error) {
	var out nodeList
	if err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Nodes, nil
}
