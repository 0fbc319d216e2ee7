package docker

import (
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// TestConformance runs the shared sandbox suite against the provider.
func TestConformance(t *testing.T) {
	p := newProvider(t, Options{})
	sandboxtest.Run(t, func(*testing.T) berth.SandboxProvider { return p }, sandboxtest.Options{Isolated: true, NoNetwork: true})
}
