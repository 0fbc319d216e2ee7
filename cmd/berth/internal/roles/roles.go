// Package roles names the hidden commands a berth binary runs as beside
// each agent, for as long as its session lives: the processes whose
// memory is counted once per session. It imports nothing that initialises
// late, so that the first packages to run can tell them apart.
package roles

import "slices"

// The long-lived hidden commands.
const (
	// Shim is the shim of a host or bwrap session of a berth built
	// without the small shim.
	Shim = "shim-local"
	// Relay is the gateway and egress relay an agent in an isolating
	// sandbox runs under.
	Relay = "agent-exec"
	// MCP is the berth MCP server's relay, as the agent starts it.
	MCP = "mcp"
	// DemoAgent is the demo agent.
	DemoAgent = "agent-demo"
)

// LongLived reports whether args (a process's os.Args) run one of them.
func LongLived(args []string) bool {
	return len(args) > 1 && slices.Contains([]string{Shim, Relay, MCP, DemoAgent}, args[1])
}

// Daemon reports whether args (a process's os.Args) run the daemon.
func Daemon(args []string) bool {
	return len(args) > 1 && args[1] == "serve"
}
