package daemon

import (
	"os"
	"testing"

	"github.com/berth-sh/berth/acp/demoagent"
)

// agentEnvVar makes the test binary run the demo agent instead of the
// tests: the agent of the daemons these tests open (demoAgent).
const agentEnvVar = "BERTH_DAEMON_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnvVar) == "demo" {
		os.Exit(demoagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
