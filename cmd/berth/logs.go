package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// newLogsCommand returns `berth logs ID [-f] [--after N]`.
func newLogsCommand() *cobra.Command {
	var (
		follow bool
		after  int64
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a session's event log (-f follows it live)",
		Long: "Print a session's event log, one event a line: seq, time, the turn it is in (- for\n" +
			"none), type and a short rendering of its data. -f follows the log live until the\n" +
			"session stops; -o json prints each event's JSON on its own line.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return usagef(cmd, "--after must not be negative")
			}
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			emit := eventPrinter(cmd.OutOrStdout(), asJSON)
			if follow {
				return followEvents(cmd.Context(), c, args[0], after, emit)
			}
			return pageEvents(cmd.Context(), c, args[0], after, emit)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log live (until the session stops or Ctrl-C)")
	cmd.Flags().Int64Var(&after, "after", 0, "start after this seq")
	return cmd
}

// eventPrinter returns a function printing one event's JSON: verbatim on
// one line with -o json, else as a log line.
func eventPrinter(w io.Writer, asJSON bool) func(json.RawMessage) error {
	return func(raw json.RawMessage) error {
		if asJSON {
			return printRaw(w, raw)
		}
		var ev berth.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("the daemon sent an event that does not decode: %w", err)
		}
		return writeLogLine(w, ev)
	}
}

// pageEvents prints every stored event after after, a page at a time.
func pageEvents(ctx context.Context, c *bclient.Client, id string, after int64, emit func(json.RawMessage) error) error {
	for {
		var page struct {
			Events    []json.RawMessage `json:"events"`
			NextAfter int64             `json:"next_after"`
		}
		f := berth.EventFilter{After: after, Limit: berth.MaxEventLimit}
		if err := c.Do(ctx, http.MethodGet, sessionPath(id, "/events"), bclient.EventQuery(f), nil, &page); err != nil {
			return err
		}
		for _, raw := range page.Events {
			if err := emit(raw); err != nil {
				return err
			}
		}
		// An empty page, or one that does not move, is the end of the log.
		if len(page.Events) == 0 || page.NextAfter <= after {
			return nil
		}
		after = page.NextAfter
	}
}

// followEvents prints the events after after, then the live ones, until
// the session stops or ctx ends (Ctrl-C, which is not a failure).
func followEvents(ctx context.Context, c *bclient.Client, id string, after int64, emit func(json.RawMessage) error) error {
	for raw, err := range c.EventsRaw(ctx, id, after) {
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := emit(raw); err != nil {
			return err
		}
	}
	return nil
}
