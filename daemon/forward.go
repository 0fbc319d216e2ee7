package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	bhttp "github.com/berth-sh/berth/http"
)

// advertiseMaxAge is how long the API's copy of the nodes' advertise URLs
// is trusted before a forward reads them again (a node that comes back may
// come back elsewhere).
const advertiseMaxAge = 5 * time.Second

// apiCluster is the API server's view of the cluster (bhttp.Cluster): who
// drives a session (the holder of its live lease) and where that node is
// reached.
type apiCluster struct {
	self, token string
	leases      berth.LeaseStore
	nodes       berth.NodeStore

	mu   sync.Mutex
	urls map[string]string // node id → advertise
	read time.Time         // when urls was read
}

// apiCluster returns the API's cluster, nil when the daemon runs alone.
func (d *Daemon) apiCluster(token string) bhttp.Cluster {
	ns, ok := d.store.(berth.NodeStore)
	if d.node == nil || !ok {
		return nil
	}
	return &apiCluster{self: d.node.ID(), token: token, leases: d.store, nodes: ns}
}

// Self implements bhttp.Cluster.
func (c *apiCluster) Self() string { return c.self }

// Token implements bhttp.Cluster.
func (c *apiCluster) Token() string { return c.token }

// Nodes implements bhttp.Cluster.
func (c *apiCluster) Nodes(ctx context.Context) ([]*berth.Node, error) {
	return c.nodes.ListNodes(ctx)
}

// Owner implements bhttp.Cluster: the holder of the session's lease while
// it is live; none for a session without one (stopped, or never placed).
func (c *apiCluster) Owner(ctx context.Context, id string) (string, string, error) {
	l, err := c.leases.GetLease(ctx, id)
	switch {
	case berth.IsCode(err, berth.ENotFound):
		return "", "", nil
	case err != nil:
		return "", "", err
	case l.Owner == "" || !l.ExpiresAt.After(time.Now()):
		return "", "", nil
	case l.Owner == c.self:
		return c.self, "", nil
	}
	url, err := c.advertise(ctx, l.Owner)
	return l.Owner, url, err
}

// advertise returns where node id is reached, reading the registry when
// the copy is old or lacks it.
func (c *apiCluster) advertise(ctx context.Context, id string) (string, error) {
	c.mu.Lock()
	url, ok := c.urls[id]
	fresh := time.Since(c.read) < advertiseMaxAge
	c.mu.Unlock()
	if ok && fresh {
		return url, nil
	}
	nodes, err := c.nodes.ListNodes(ctx)
	if err != nil {
		return "", err
	}
	urls := make(map[string]string, len(nodes))
	for _, n := range nodes {
		urls[n.ID] = n.Advertise
	}
	c.mu.Lock()
	c.urls, c.read = urls, time.Now()
	c.mu.Unlock()
	return urls[id], nil
}

// watchEvents makes the commits of other nodes wake this node's readers
// (the event log re-reads the store), until stopWatch. Nothing happens
// alone or with a store that cannot tell.
func (d *Daemon) watchEvents() {
	w, ok := d.store.(berth.EventWatcher)
	if d.node == nil || !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	d.stopWatch = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		if err := w.WatchEvents(ctx, d.log.Notify); err != nil && ctx.Err() == nil {
			d.logger.Error("event notices stopped: streams of sessions other nodes drive are no longer live", "err", err)
		}
	}()
}
