package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth/acp/demoagent"
)

// newAgentDemoCmd is the hidden command that runs the demo agent on stdio.
func newAgentDemoCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "agent-demo [--state-dir DIR]",
		Short:              "Run berth's deterministic demo ACP agent on stdin/stdout",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			// An agent dies on SIGTERM like any process: main's handler is for the daemon.
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			os.Exit(demoagent.Main(args, os.Stdin, os.Stdout, os.Stderr))
			return nil
		},
	}
}
