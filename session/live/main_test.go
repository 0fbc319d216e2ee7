package live

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-sh/berth/acp/demoagent"
)

// agentEnvVar makes the test binary run the demo agent instead of tests,
// so live sessions run the real agent as a real child process.
const agentEnvVar = "BERTH_LIVE_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnvVar) == "demo" {
		os.Exit(demoagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
