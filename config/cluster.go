package config

import (
	"net/url"
	"strings"
	"time"
)

// Cluster is the [cluster] section (docs/api.md, "Cluster nodes: ownership and
// failover"): this daemon as one node of several sharing one PostgreSQL store.
// Cluster mode is on when the store is PostgreSQL and NodeID is set.
type Cluster struct {
	// NodeID names this node among those sharing the store; "" runs one
	// node alone (berth serve --node-id).
	NodeID string `toml:"node_id"`
	// Advertise is the base URL the other nodes forward this node's
	// sessions' writes to, http(s)://host:port (berth serve --advertise).
	Advertise string `toml:"advertise"`
	// LeaseTTL is how long a node may go without a heartbeat before the
	// others mark it lost and stop its sessions (1s..10m, default 10s).
	LeaseTTL Duration `toml:"lease_ttl"`
	// Token authenticates one node's forwarded requests to another; every
	// node of a cluster has the same one. Required in cluster mode.
	Token string `toml:"token"`
	// Failover is what becomes of a lost node's sessions: "resume" moves
	// each, once, to the least-loaded live node, its workspace and HOME
	// restored from the object store; "stop" leaves them stopped/node_lost
	// for a resume by hand. "" is "resume" with a [storage] url, else
	// "stop" (FailoverMode).
	Failover string `toml:"failover"`
}

// Failover modes ([cluster] failover).
const (
	FailoverResume = "resume"
	FailoverStop   = "stop"
)

// FailoverMode is [cluster] failover with its default filled in:
// "resume" when sessions' state goes to an object store, else "stop".
func (c *Config) FailoverMode() string {
	switch {
	case c.Cluster.Failover != "":
		return c.Cluster.Failover
	case c.Storage.Enabled():
		return FailoverResume
	default:
		return FailoverStop
	}
}

// DefaultLeaseTTL is [cluster] lease_ttl's default.
const DefaultLeaseTTL = 10 * time.Second

// maxNodeID bounds a node id's length.
const maxNodeID = 64

// ClusterEnabled reports whether the daemon runs as a node of a cluster: a
// PostgreSQL store and a node id.
func (c *Config) ClusterEnabled() bool {
	return c.Cluster.NodeID != "" && isPostgresURL(c.Store.URL)
}

// isPostgresURL reports whether a store URL names PostgreSQL.
func isPostgresURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

func (c *Cluster) validate() error {
	if c.LeaseTTL.Duration < time.Second || c.LeaseTTL.Duration > 10*time.Minute {
		return invalid("cluster.lease_ttl = %s is out of range (1s..10m)", c.LeaseTTL)
	}
	if c.NodeID != "" && !validNodeID(c.NodeID) {
		return invalid("cluster.node_id %q: want 1..%d letters, digits, '.', '_' or '-'", c.NodeID, maxNodeID)
	}
	if c.Advertise != "" {
		u, err := url.Parse(c.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return invalid("cluster.advertise %q is not a base URL (want http(s)://host:port)", c.Advertise)
		}
	}
	return nil
}

// validateCluster checks [cluster] against the store: a node id needs
// PostgreSQL (SQLite and memory stores are one daemon's), and a cluster
// node needs the node token and an address the others can reach.
func (c *Config) validateCluster() error {
	if err := c.Cluster.validate(); err != nil {
		return err
	}
	switch c.Cluster.Failover {
	case "", FailoverStop:
	case FailoverResume:
		if !c.Storage.Enabled() {
			return invalid("cluster.failover = \"resume\" needs storage.url: a session moves to another node with its workspace and HOME from the object store")
		}
	default:
		return invalid("cluster.failover %q: want resume or stop", c.Cluster.Failover)
	}
	if c.Cluster.NodeID == "" {
		return nil
	}
	if !isPostgresURL(c.Store.URL) {
		return invalid("cluster.node_id is set but the store is not PostgreSQL: several nodes share one PostgreSQL store; with SQLite or memory: there is one node (unset node_id)")
	}
	if c.Cluster.Token == "" {
		return invalid("cluster.node_id is set but cluster.token is empty: every node of a cluster needs the node token (BERTH_CLUSTER_TOKEN)")
	}
	if c.Cluster.Advertise == "" {
		return invalid("cluster.node_id is set but cluster.advertise is empty: the other nodes need this node's URL (--advertise http://host:port)")
	}
	return nil
}

// validNodeID reports whether s may name a node.
func validNodeID(s string) bool {
	if s == "" || len(s) > maxNodeID {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
