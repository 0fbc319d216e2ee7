package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp/demoagent"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/internal/berthmcp"
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

// newMCPCmd is `berth mcp`: the berth MCP server an agent runs on stdio
// (docs/api.md, "The berth MCP server: agents spawn children"), reaching its
// session's tools socket.
func newMCPCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "mcp",
		Short:  "Serve the berth MCP server on stdin/stdout for a session's agent (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The agent ends its MCP server by closing stdin or by a signal.
			defaultSignals()
			return berthmcp.Main(cmd.Context(), versionString())
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
