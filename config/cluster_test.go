package config

import (
	"testing"
	"time"
)

// The [cluster] section: file, environment overrides, defaults, and the
// refusals that keep a node id off a store only one daemon may use.
func TestClusterSection(t *testing.T) {
	const pg = "postgres://u@127.0.0.1:5432/db"
	p := writeFile(t, "[store]\nurl = \""+pg+"\"\n[cluster]\nnode_id = \"n1\"\nadvertise = \"http://127.0.0.1:7381\"\nlease_ttl = \"3s\"\ntoken = \"file\"\n")
	c, err := Load(p, []string{"BERTH_CLUSTER_TOKEN=env-token", "BERTH_CLUSTER_LEASE_TTL=4s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Cluster.NodeID != "n1" || c.Cluster.Advertise != "http://127.0.0.1:7381" || c.Cluster.Token != "env-token" ||
		c.Cluster.LeaseTTL.Duration != 4*time.Second {
		t.Fatalf("cluster = %+v", c.Cluster)
	}
	if !c.ClusterEnabled() {
		t.Fatal("postgres + node_id is not cluster mode")
	}
	if d := Default(); d.Cluster.LeaseTTL.Duration != 10*time.Second || d.ClusterEnabled() {
		t.Fatalf("defaults: %+v, enabled %v", d.Cluster, d.ClusterEnabled())
	}

	good := func() *Config {
		c := Default()
		c.Store.URL = pg
		c.Cluster = Cluster{NodeID: "n1", Advertise: "http://127.0.0.1:7381", LeaseTTL: Duration{2 * time.Second}, Token: "t"}
		return c
	}
	cases := []struct {
		name string
		edit func(*Config)
		want []string
	}{
		{"sqlite", func(c *Config) { c.Store.URL = "" }, []string{"cluster.node_id", "PostgreSQL"}},
		{"memory", func(c *Config) { c.Store.URL = MemoryURL }, []string{"cluster.node_id", "one node"}},
		{"no token", func(c *Config) { c.Cluster.Token = "" }, []string{"cluster.token"}},
		{"no advertise", func(c *Config) { c.Cluster.Advertise = "" }, []string{"cluster.advertise"}},
		{"bad advertise", func(c *Config) { c.Cluster.Advertise = "ftp://x/y" }, []string{"cluster.advertise"}},
		{"ttl low", func(c *Config) { c.Cluster.LeaseTTL.Duration = 500 * time.Millisecond }, []string{"cluster.lease_ttl", "1s..10m"}},
		{"ttl high", func(c *Config) { c.Cluster.LeaseTTL.Duration = time.Hour }, []string{"cluster.lease_ttl"}},
		{"bad id", func(c *Config) { c.Cluster.NodeID = "a b/c" }, []string{"cluster.node_id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.edit(c)
			wantInvalid(t, c.Validate(), tc.want...)
		})
	}
	// Without a node id, postgres runs one node and needs nothing else.
	c = Default()
	c.Store.URL = pg
	if err := c.Validate(); err != nil || c.ClusterEnabled() {
		t.Fatalf("postgres alone: %v, enabled %v", err, c.ClusterEnabled())
	}
	_, err = Load(writeFile(t, "[cluster]\nnode = \"x\"\n"), nil)
	wantInvalid(t, err, "node")
}

// [cluster] failover: "resume" by default once sessions' state goes to an
// object store, "stop" (today's behaviour) without one; set from the file
// or BERTH_CLUSTER_FAILOVER; anything else, or "resume" with nothing to
// restore from, is refused naming the key.
func TestClusterFailover(t *testing.T) {
	const s3 = "s3://bucket/p?endpoint=http://127.0.0.1:9000&region=us-east-1"
	c := Default()
	if got := c.FailoverMode(); got != FailoverStop {
		t.Fatalf("default without storage = %q", got)
	}
	c.Storage.URL = s3
	if got := c.FailoverMode(); got != FailoverResume {
		t.Fatalf("default with storage = %q", got)
	}
	c.Cluster.Failover = FailoverStop
	if err := c.Validate(); err != nil || c.FailoverMode() != FailoverStop {
		t.Fatalf("stop with storage: %v, mode %q", err, c.FailoverMode())
	}
	p := writeFile(t, "[storage]\nurl = \""+s3+"\"\n[cluster]\nfailover = \"stop\"\n")
	c, err := Load(p, []string{"BERTH_CLUSTER_FAILOVER=resume"})
	if err != nil || c.FailoverMode() != FailoverResume {
		t.Fatalf("from the environment: %v, mode %q", err, c.FailoverMode())
	}
	_, err = Load(writeFile(t, "[cluster]\nfailover = \"resume\"\n"), nil)
	wantInvalid(t, err, "cluster.failover", "storage.url")
	_, err = Load(writeFile(t, "[storage]\nurl = \""+s3+"\"\n[cluster]\nfailover = \"move\"\n"), nil)
	wantInvalid(t, err, "cluster.failover", `"move"`)
}
