package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// newPromptCommand returns `berth prompt ID "text"`.
func newPromptCommand() *cobra.Command {
	var queue, interrupt, steer, wait bool
	cmd := &cobra.Command{
		Use:   `prompt ID "text"`,
		Short: "Send a prompt to a session (\"-\" reads it from standard input)",
		Long: "Send a prompt to a session. When the agent is busy the prompt is queued (--queue,\n" +
			"the default), interrupts the turn in flight (--interrupt), or is delivered into it\n" +
			"at its next tool call (--steer). --wait prints the agent's answer when the turn ends.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := berth.PromptRequest{Text: args[1]}
			n := 0
			for mode, on := range map[string]bool{berth.ModeQueue: queue, berth.ModeInterrupt: interrupt, berth.ModeSteer: steer} {
				if on {
					req.Mode = mode
					n++
				}
			}
			if n > 1 {
				return usagef(cmd, "--queue, --interrupt and --steer exclude each other")
			}
			if req.Text == "-" {
				b, err := io.ReadAll(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("reading the prompt from standard input: %w", err)
				}
				req.Text = string(b)
			}
			path := sessionPath(args[0], "/prompts")
			if !wait {
				return callAPI(cmd, http.MethodPost, path, nil, req, writePromptResult)
			}
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodPost, path, url.Values{"wait": {"true"}}, req, &raw); err != nil {
				return err
			}
			var r berth.TurnResult
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("the daemon's answer does not decode: %w", err)
			}
			if asJSON {
				err = printRaw(cmd.OutOrStdout(), raw)
			} else {
				err = writeTurnResult(cmd.OutOrStdout(), &r)
			}
			// The exit code tells how the turn ended, whatever the output format.
			if err == nil && r.Error != nil {
				return fmt.Errorf("the turn ended with an error: %s: %s", r.Error.Code, r.Error.Message)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&queue, "queue", false, "when busy, queue the prompt after the turn in flight (default)")
	fl.BoolVar(&interrupt, "interrupt", false, "when busy, cancel the turn in flight and the queue, then start this one")
	fl.BoolVar(&steer, "steer", false, "when busy, deliver the prompt into the turn in flight")
	fl.BoolVar(&wait, "wait", false, "wait for the turn to end and print the agent's answer")
	return cmd
}

// writePromptResult prints what became of a prompt.
func writePromptResult(w io.Writer, r *berth.PromptResult) error {
	var msg string
	switch r.Status {
	case "started":
		msg = "started turn " + r.TurnID
		if r.InterruptedTurnID != "" {
			msg = fmt.Sprintf("interrupted turn %s", r.InterruptedTurnID)
			if r.CanceledEntries != nil {
				msg += fmt.Sprintf(", canceled %d queued", *r.CanceledEntries)
			}
			msg += "; started turn " + r.TurnID
		}
	case "queued":
		msg = fmt.Sprintf("queued as %s (position %d)", r.EntryID, r.Position)
	case "staged":
		msg = fmt.Sprintf("staged as %s for the turn in flight", r.EntryID)
	default:
		msg = strings.TrimSpace(r.Status + " " + r.TurnID + " " + r.EntryID)
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

// writeTurnResult prints the agent's answer and how the turn ended.
func writeTurnResult(w io.Writer, r *berth.TurnResult) error {
	if r.Text != "" {
		fmt.Fprint(w, r.Text)
		if !strings.HasSuffix(r.Text, "\n") {
			fmt.Fprintln(w)
		}
	}
	end := "[" + orDash(r.StopReason)
	if r.Error != nil {
		end += ": " + r.Error.Message
	}
	_, err := fmt.Fprintf(w, "%s] turn %s\n", end, r.TurnID)
	return err
}

// newCancelCommand returns `berth cancel ID`.
func newCancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel the turn in flight",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			type cancelResult struct {
				TurnID string `json:"turn_id"`
			}
			return callAPI(cmd, http.MethodPost, sessionPath(args[0], "/cancel"), nil, nil, func(w io.Writer, r *cancelResult) error {
				_, err := fmt.Fprintf(w, "cancelling turn %s\n", r.TurnID)
				return err
			})
		},
	}
}
