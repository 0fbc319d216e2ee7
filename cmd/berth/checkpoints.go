package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"

	bclient "github.com/berth-sh/berth/client"
)

// checkpointCommands returns `berth checkpoints`, `berth rewind` and
// `berth fork` (docs/api.md, "Checkpoints, rewind and fork").
func checkpointCommands() []*cobra.Command {
	return []*cobra.Command{newCheckpointsCommand(), newRewindCommand(), newForkCommand()}
}

// newCheckpointsCommand returns `berth checkpoints ID`: each checkpoint
// beside the turn it was taken before and that turn's prompt, so that the
// one before a bad turn is found by what was asked.
func newCheckpointsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoints ID",
		Short: "List the workspace checkpoints taken before each turn, with the turn's prompt",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodGet, sessionPath(args[0], "/checkpoints"), nil, nil, &raw); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return printRaw(w, raw)
			}
			var l struct {
				Checkpoints []*berth.Checkpoint `json:"checkpoints"`
			}
			if err := json.Unmarshal(raw, &l); err != nil {
				return fmt.Errorf("the daemon's answer does not decode: %w", err)
			}
			prompts, err := turnPrompts(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			t := newTable(w)
			fmt.Fprintln(t, "CHECKPOINT\tTURN\tPROMPT\tFILES\tBYTES\tSKIPPED\tCREATED")
			for _, ck := range l.Checkpoints {
				fmt.Fprintf(t, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", ck.ID, ck.TurnID, promptCell(prompts[ck.TurnID]), ck.Files, ck.Bytes,
					ck.SkippedTotal, ck.CreatedAt.Local().Format(time.DateTime))
			}
			return t.Flush()
		},
	}
}

// maxPromptCell is how much of a prompt the checkpoints table shows.
const maxPromptCell = 40

// promptCell is a prompt's first line, cut to maxPromptCell and escaped;
// "-" for none.
func promptCell(text string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	return orDash(shorten(strings.TrimSpace(first), maxPromptCell))
}

// turnPrompts maps the turns of a session's log to their prompts' text:
// its turn_started events, read page by page (at most maxListPages).
func turnPrompts(ctx context.Context, c *bclient.Client, id string) (map[string]string, error) {
	prompts := map[string]string{}
	f := berth.EventFilter{Type: string(berth.EventTurnStarted), Limit: berth.MaxEventLimit}
	for range maxListPages {
		evs, err := c.ListEvents(ctx, id, f)
		if err != nil || len(evs) == 0 {
			return prompts, err
		}
		for _, ev := range evs {
			prompts[ev.TurnID] = decodeData(ev).str("text")
		}
		f.After = evs[len(evs)-1].Seq
	}
	return prompts, nil
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
	var (
		req   berth.ForkRequest
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "fork ID CKPT [--agent A] [--name N] [-q]",
		Short: "Start a new session from a checkpoint: its workspace and the conversation before it",
		Long: "Start a new session from a checkpoint: its workspace and the conversation before it.\n" +
			"-q prints only the new session's id, for scripts: fork=$(berth fork ID CKPT -q)",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.CheckpointID = args[1]
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodPost, sessionPath(args[0], "/fork"), nil, req, &raw); err != nil {
				return err
			}
			var s berth.Session
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("the daemon's answer does not decode: %w", err)
			}
			w := cmd.OutOrStdout()
			switch {
			case quiet:
				// The id alone, whatever -o says (as create -q).
				_, err = fmt.Fprintln(w, s.ID)
			case asJSON:
				err = printRaw(w, raw)
			default:
				_, err = fmt.Fprintf(w, "%s (%s, forked from %s at %s)\n", s.ID, s.State, args[0], req.CheckpointID)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&req.Agent, "agent", "", "the fork's agent (default: the session's)")
	cmd.Flags().StringVar(&req.Name, "name", "", "the fork's name")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the new session's id")
	return cmd
}
