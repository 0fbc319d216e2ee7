package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/internal/berthmcp"
)

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
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			return berthmcp.Main(cmd.Context(), versionString())
		},
	}
}
