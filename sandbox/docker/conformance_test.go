package docker

import (
	"context"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// TestConformance runs the shared sandbox suite against the provider. The
// network case needs the engine's default bridge (scripts/dockerd.sh makes
// one; TestMain's own engine has none): without one it skips.
func TestConformance(t *testing.T) {
	p := newProvider(t, Options{})
	sandboxtest.Run(t, func(*testing.T) berth.SandboxProvider { return p }, sandboxtest.Options{Isolated: true, NoNetwork: !hasBridge(p), NoOOMCount: true})
}

// hasBridge reports whether the engine has its default bridge network.
func hasBridge(p *Provider) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := p.cli.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	return err == nil
}
