package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// newPromptCommand returns `berth prompt ID "text"`.
func newPromptCommand() *cobra.Command {
	var queue, interrupt, steer, wait bool
	var timeout time.Duration
	var files, images []string
	cmd := &cobra.Command{
		Use:   `prompt ID ["text"] [--file PATH]… [--image PATH]…`,
		Short: "Send a prompt to a session (\"-\" reads it from standard input)",
		Long: "Send a prompt to a session. When the agent is busy the prompt is queued (--queue,\n" +
			"the default), interrupts the turn in flight (--interrupt), or is delivered into it\n" +
			"at its next tool call (--steer). --wait prints the agent's answer when the turn ends,\n" +
			"and meanwhile says on stderr when the turn waits for a permission or the agent stalls.\n" +
			"--file attaches a file of the session's workspace (a path relative to it, or inside\n" +
			"it), --image an image file this command reads; both repeat, after the text.",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && len(files)+len(images) == 0 {
				return usagef(cmd, "give the prompt's text, --file or --image")
			}
			var req berth.PromptRequest
			if len(args) == 2 {
				req.Text = args[1]
			}
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
			if len(files)+len(images) > 0 {
				blocks, err := promptContent(req.Text, files, images)
				if err != nil {
					return err
				}
				req.Text, req.Content = "", blocks
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
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			// While the turn runs, stderr says what it waits on.
			watchCtx, stopWatch := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { watchTurn(watchCtx, c, args[0], cmd.ErrOrStderr(), progressEvery) })
			var raw json.RawMessage
			err = c.Do(ctx, http.MethodPost, path, url.Values{"wait": {"true"}}, req, &raw)
			stopWatch()
			wg.Wait()
			if err != nil {
				if timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && cmd.Context().Err() == nil {
					return berth.Errorf(berth.EUnavailable, "the turn did not end within %s; it goes on (berth attach %s follows it, berth cancel %s ends it)", timeout, args[0], args[0])
				}
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
				return turnFailed(r.Error.Code, r.Error.Message)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&queue, "queue", false, "when busy, queue the prompt after the turn in flight (default)")
	fl.BoolVar(&interrupt, "interrupt", false, "when busy, cancel the turn in flight and the queue, then start this one")
	fl.BoolVar(&steer, "steer", false, "when busy, deliver the prompt into the turn in flight")
	fl.BoolVar(&wait, "wait", false, "wait for the turn to end and print the agent's answer (stderr says what it waits on)")
	fl.DurationVar(&timeout, "timeout", 0, "with --wait, give up waiting after this long (the turn goes on); exit 1")
	fl.StringArrayVar(&files, "file", nil, "attach a file of the session's workspace (repeatable)")
	fl.StringArrayVar(&images, "image", nil, "attach a local image file, its type read from its content (repeatable)")
	return cmd
}

// progressEvery is how often watchTurn looks at the session, and
// stillRunningEvery how often it says a long turn still runs.
const (
	progressEvery     = time.Second
	stillRunningEvery = 30 * time.Second
)

// watchTurn says on w what a waiting prompt waits on, as it changes: a
// permission question (and how to answer it), an agent that stalled, a
// turn that keeps running. It ends with ctx.
func watchTurn(ctx context.Context, c *bclient.Client, id string, w io.Writer, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	start := time.Now()
	lastSaid := start
	var badge berth.Badge
	asked := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s, err := c.GetSession(ctx, id)
		if err != nil {
			continue
		}
		switch {
		case s.Badge == berth.BadgeWaiting:
			perms, err := c.ListPermissions(ctx, id, berth.PermissionPending)
			if err != nil {
				continue
			}
			for _, p := range perms {
				if asked[p.ID] {
					continue
				}
				asked[p.ID] = true
				fmt.Fprintf(w, "waiting for permission %s (%s): berth approve %s %s [--option %s | --reject]\n",
					p.ID, orDash(toolTitle(p)), id, p.ID, optionText(p))
				lastSaid = time.Now()
			}
		case s.Badge != badge && (s.Badge == berth.BadgeHung || s.Badge == berth.BadgeNeedsAuth):
			fmt.Fprintf(w, "the session is %s: %s\n", s.Badge, badgeHint(s.Badge, id))
			lastSaid = time.Now()
		case s.Badge != badge && badge != "" && s.Badge == berth.BadgeRunning:
			fmt.Fprintln(w, "running again")
			lastSaid = time.Now()
		case time.Since(lastSaid) >= stillRunningEvery:
			fmt.Fprintf(w, "still running (%s)\n", time.Since(start).Round(time.Second))
			lastSaid = time.Now()
		}
		badge = s.Badge
	}
}

// badgeHint says what a user can do about a badge.
func badgeHint(b berth.Badge, id string) string {
	switch b {
	case berth.BadgeHung:
		return "the agent has said nothing for a while (berth cancel " + id + " ends the turn)"
	case berth.BadgeNeedsAuth:
		return "the agent needs you to sign in to its service"
	}
	return string(b)
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
	type cancelResult struct {
		TurnID string `json:"turn_id"`
	}
	return sessionCommand("cancel ID", "Cancel the turn in flight", http.MethodPost, "/cancel",
		func(w io.Writer, _ string, r *cancelResult) error {
			_, err := fmt.Fprintf(w, "cancelling turn %s\n", r.TurnID)
			return err
		})
}
