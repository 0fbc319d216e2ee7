package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// checkpointCommands returns `berth checkpoints`, `berth rewind` and
// `berth fork` (docs/api.md, "Checkpoints, rewind and fork").
func checkpointCommands() []*cobra.Command {
	return []*cobra.Command{newCheckpointsCommand(), newRewindCommand(), newForkCommand()}
}

// newCheckpointsCommand returns `berth checkpoints ID`.
func newCheckpointsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoints ID",
		Short: "List the workspace checkpoints taken before each turn",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			type list struct {
				Checkpoints []*berth.Checkpoint `json:"checkpoints"`
			}
			return callAPI(cmd, http.MethodGet, sessionPath(args[0], "/checkpoints"), nil, nil, func(w io.Writer, l *list) error {
				t := newTable(w)
				fmt.Fprintln(t, "CHECKPOINT\tTURN\tFILES\tBYTES\tSKIPPED\tCREATED")
				for _, c := range l.Checkpoints {
					fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%s\n", c.ID, c.TurnID, c.Files, c.Bytes, c.SkippedTotal,
						c.CreatedAt.Local().Format(time.DateTime))
				}
				return t.Flush()
			})
		},
	}
}

// newRewindCommand returns `berth rewind ID CKPT`.
func newRewindCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rewind ID CKPT",
		Short: "Restore an idle session's workspace to a checkpoint",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := berth.RewindRequest{CheckpointID: args[1]}
			return callAPI(cmd, http.MethodPost, sessionPath(args[0], "/rewind"), nil, req, func(w io.Writer, s *berth.Session) error {
				_, err := fmt.Fprintf(w, "rewound %s to %s\n", s.ID, req.CheckpointID)
				return err
			})
		},
	}
}

// newForkCommand returns `berth fork ID CKPT [--agent A] [--name N]`.
func newForkCommand() *cobra.Command {
	var req berth.ForkRequest
	cmd := &cobra.Command{
		Use:   "fork ID CKPT [--agent A] [--name N]",
		Short: "Start a new session from a checkpoint: its workspace and the conversation before it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.CheckpointID = args[1]
			return callAPI(cmd, http.MethodPost, sessionPath(args[0], "/fork"), nil, req, func(w io.Writer, s *berth.Session) error {
				_, err := fmt.Fprintf(w, "%s (%s, forked from %s at %s)\n", s.ID, s.State, args[0], req.CheckpointID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&req.Agent, "agent", "", "the fork's agent (default: the session's)")
	cmd.Flags().StringVar(&req.Name, "name", "", "the fork's name")
	return cmd
}
