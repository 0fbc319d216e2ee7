package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/sandbox/docker"
	"github.com/berth-sh/berth/sandbox/providers"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// providerOptions are what it takes to make the sandbox providers the
// daemon has, passed to its shims so theirs are the same.
type providerOptions struct{ shimcmd.Options }

// newProviderOptions collects the provider options of a daemon.
func newProviderOptions(cfg *config.Config, self, home string) providerOptions {
	return providerOptions{shimcmd.Options{UID: cfg.Sandbox.UID, HostUID: cfg.Sandbox.HostUID, DockerHost: cfg.Sandbox.Docker.Host,
		DockerImage: cfg.Sandbox.Docker.Image, Berth: self, Limits: cfg.Sandbox.Limits(), Instance: nodeID(home),
		// In the run directory, which no sandbox sees but through it.
		EtcView: filepath.Join(home, "run", "etc")}}
}

// AnyProvider makes the sandbox provider called name for a shim (`berth
// shim`), docker included (the small berth-shim makes host and bwrap
// only). close releases it.
func AnyProvider(o shimcmd.Options, name string) (p berth.SandboxProvider, close func(), err error) {
	return providers.Make(o, name)
}

// nodeID returns this home's stable node id, creating it once.
func nodeID(home string) string {
	path := filepath.Join(home, "node_id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	buf := make([]byte, 6)
	_, _ = rand.Read(buf)
	id := "node_" + hex.EncodeToString(buf)
	_ = os.WriteFile(path, []byte(id+"\n"), 0o600)
	return id
}

// ProviderOptions returns the sandbox provider options a daemon of this
// config and home has (self is the berth binary; "" for a probe that
// starts no agent), for `berth doctor` to probe the same providers.
func ProviderOptions(cfg *config.Config, self, home string) shimcmd.Options {
	return newProviderOptions(cfg, self, home).Options
}

// Docker makes the docker provider of o.
func Docker(o shimcmd.Options) (*docker.Provider, error) { return providers.Docker(o) }
