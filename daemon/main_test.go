package daemon

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/berth-sh/berth/acp/demoagent"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// agentEnvVar makes the test binary run the demo agent instead of the
// tests: the agent of the daemons these tests open (demoAgent).
const agentEnvVar = "BERTH_DAEMON_TEST_AGENT"

// TestMain runs the tests, or the role a daemon of theirs started this
// binary in: the demo agent, or a shim (`shim --options JSON`, as a daemon
// with shims starts os.Executable(), spare ones included, before any
// session). Run as a shim, the binary must never run the tests again: each
// would open daemons starting shims of their own, without end.
func TestMain(m *testing.M) {
	if os.Getenv(agentEnvVar) == "demo" {
		os.Exit(demoagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		raw, ok := shimcmd.OptionsArg(os.Args[2:])
		if !ok {
			fmt.Fprintln(os.Stderr, "daemon.test shim: want --options JSON")
			os.Exit(2)
		}
		opts, err := shimcmd.ParseOptions(raw)
		if err == nil {
			err = shimcmd.Run(context.Background(), opts, os.Stdin, os.Stdout, AnyProvider)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "daemon.test shim:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
