package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp/demoagent"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/gateway/relay"
	"github.com/berth-sh/berth/internal/mcprelay"
	"github.com/berth-sh/berth/shim/shimcmd"
)

// The hidden commands: programs berth runs as children of a daemon or of
// an agent, not commands for people.

// newAgentDemoCmd is the hidden command that runs the demo agent on stdio.
func newAgentDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "agent-demo [--state-dir DIR]",
		Short:              "Run berth's deterministic demo ACP agent on stdin/stdout",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// An agent dies on SIGTERM like any process.
			defaultSignals()
			os.Exit(demoagent.Main(args, os.Stdin, os.Stdout, os.Stderr))
			return nil
		},
	}
}

// newAgentExecCmd is `berth agent-exec`: what an agent in an isolating
// sandbox runs as, so that the model gateway is on the sandbox's own
// loopback (docs/api.md, The model gateway; package gateway/relay).
func newAgentExecCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "agent-exec --gateway-listen ADDR --gateway-socket PATH [--egress-listen ADDR --egress-socket PATH] -- PROGRAM [ARGS…]",
		Short:  "Run an agent with the model gateway relayed onto the sandbox's loopback (internal)",
		Hidden: true,
		Args:   cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			listen, _ := cmd.Flags().GetString("gateway-listen")
			socket, _ := cmd.Flags().GetString("gateway-socket")
			egressListen, _ := cmd.Flags().GetString("egress-listen")
			egressSocket, _ := cmd.Flags().GetString("egress-socket")
			// The relay passes the signals on to the agent itself.
			defaultSignals()
			os.Exit(relay.Run(relay.Options{Listen: listen, Socket: socket,
				EgressListen: egressListen, EgressSocket: egressSocket, Argv: args, Stderr: os.Stderr}))
			return nil
		},
	}
	// The agent's own flags are its own.
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().String("gateway-listen", relay.DefaultListen, "the loopback address the agent calls the model gateway at")
	cmd.Flags().String("gateway-socket", relay.DefaultSocket, "the Unix socket the daemon serves the session's model gateway on")
	cmd.Flags().String("egress-listen", "", "the loopback address the agent's HTTP_PROXY points at (none by default)")
	cmd.Flags().String("egress-socket", "", "the Unix socket the daemon serves the session's egress proxy on")
	return cmd
}

// newMCPCmd is `berth mcp`: the berth MCP server as an agent runs it on
// stdio (docs/api.md, "The berth MCP server: agents spawn children"), a
// relay to the one its session's tools socket serves. childentry runs it
// before the command tree; this is its help and its refusal of arguments.
func newMCPCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "mcp",
		Short:  "Relay the berth MCP server to a session's agent on stdin/stdout (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The agent ends its MCP server by closing stdin or by a signal.
			defaultSignals()
			if code := mcprelay.Main(); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}

// defaultSignals gives SIGINT and SIGTERM their default action back to a
// program berth runs as a child: main's handler is for the daemon.
func defaultSignals() { signal.Reset(os.Interrupt, syscall.SIGTERM) }

// newShimCmd is the hidden command a daemon runs once per session to hold
// its agent (see package shim) when it has no small berth-shim to run, or
// for the docker provider. The job comes on stdin.
func newShimCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "shim --options JSON",
		Short:  "Hold one session's agent for the daemon (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, _ := cmd.Flags().GetString("options")
			opts, err := shimcmd.ParseOptions(raw)
			if err != nil {
				return usagef(cmd, "%s", berth.ErrorMessage(err))
			}
			return shimcmd.Run(cmd.Context(), opts, os.Stdin, os.Stdout, daemon.AnyProvider)
		},
	}
	cmd.Flags().String("options", "{}", "the daemon's sandbox provider options, as JSON")
	return cmd
}
