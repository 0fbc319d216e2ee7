package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/shim/shimcmd"
)

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
