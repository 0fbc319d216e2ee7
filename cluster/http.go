package cluster

import (
	"context"

	"github.com/berth-sh/berth"
)

// Self is the node's id (http.Cluster).
func (n *Node) Self() string { return n.opts.ID }

// Token is the node token forwarded requests carry (http.Cluster).
func (n *Node) Token() string { return n.opts.Token }

// Owner names the node driving a session, the holder of its live lease,
// and the URL it is reached at; "" when no node drives it (http.Cluster).
func (n *Node) Owner(ctx context.Context, sessionID string) (string, string, error) {
	l, err := n.store.GetLease(ctx, sessionID)
	if berth.IsCode(err, berth.ENotFound) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	if l.Owner == "" || !l.ExpiresAt.After(n.opts.Now()) {
		return "", "", nil
	}
	if l.Owner == n.opts.ID {
		return l.Owner, n.opts.Advertise, nil
	}
	if adv, ok := n.advertised(l.Owner); ok {
		return l.Owner, adv, nil
	}
	if err := n.refreshAdvertise(ctx); err != nil {
		return "", "", err
	}
	adv, _ := n.advertised(l.Owner)
	return l.Owner, adv, nil
}

// Nodes lists the nodes sharing the store, oldest first (http.Cluster).
func (n *Node) Nodes(ctx context.Context) ([]*berth.Node, error) {
	nodes, err := n.nodes.ListNodes(ctx)
	if err == nil {
		n.rememberAdvertise(nodes)
	}
	return nodes, err
}

// advertised returns the URL a node was last seen advertising.
func (n *Node) advertised(id string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	adv, ok := n.adverts[id]
	return adv, ok
}

// refreshAdvertise reads every node's URL again.
func (n *Node) refreshAdvertise(ctx context.Context) error {
	_, err := n.Nodes(ctx)
	return err
}

// rememberAdvertise keeps the nodes' URLs, for Owner.
func (n *Node) rememberAdvertise(nodes []*berth.Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.adverts == nil {
		n.adverts = map[string]string{}
	}
	for _, nd := range nodes {
		n.adverts[nd.ID] = nd.Advertise
	}
}
