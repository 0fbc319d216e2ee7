package host

import (
	"testing"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/sandbox/sandboxtest"
)

// The host provider isolates nothing: it runs the suite's functional
// cases only.
func TestSandboxSuite(t *testing.T) {
	sandboxtest.Run(t, func(*testing.T) berth.SandboxProvider { return New() }, sandboxtest.Options{})
}
