package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
)

// defaultRecentDeliveries is how many deliveries `berth hooks` shows.
const defaultRecentDeliveries = 20

// newHooksCommand returns `berth hooks`: the configured hooks and the
// latest deliveries; `berth hooks deliveries` pages the deliveries alone.
func newHooksCommand() *cobra.Command {
	var f berth.HookDeliveryFilter
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "List the configured hooks and their latest deliveries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var hooksRaw, deliveriesRaw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/hooks", nil, nil, &hooksRaw); err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/hooks/deliveries", bclient.HookDeliveryQuery(f), nil, &deliveriesRaw); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				// The two API answers, one per line.
				if err := printRaw(out, hooksRaw); err != nil {
					return err
				}
				return printRaw(out, deliveriesRaw)
			}
			var hs struct {
				Hooks []berth.HookInfo `json:"hooks"`
			}
			var page berth.HookDeliveryPage
			if err := json.Unmarshal(hooksRaw, &hs); err != nil {
				return fmt.Errorf("the daemon sent hooks that do not decode: %w", err)
			}
			if err := json.Unmarshal(deliveriesRaw, &page); err != nil {
				return fmt.Errorf("the daemon sent deliveries that do not decode: %w", err)
			}
			if len(hs.Hooks) == 0 {
				fmt.Fprintln(out, "no hooks configured ([[hooks]] in the config file)")
			} else {
				t := newTable(out)
				fmt.Fprintln(t, "HOOK\tKIND\tTARGET\tEVENTS\tFILTER")
				for _, h := range hs.Hooks {
					filter := labelsText(h.Labels)
					if h.Agent != "" {
						filter = "agent=" + h.Agent + " " + filter
					}
					fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", h.Name, h.Kind, h.Target, strings.Join(h.Events, ","), orDash(strings.TrimSpace(filter)))
				}
				if err := t.Flush(); err != nil {
					return err
				}
			}
			if len(page.Deliveries) == 0 {
				return nil
			}
			fmt.Fprintln(out)
			return writeDeliveries(out, page.Deliveries)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.State, "state", "", "only deliveries in this state: pending, failed, delivered")
	fl.IntVar(&f.Limit, "limit", defaultRecentDeliveries, "how many of the latest deliveries to show")
	cmd.AddCommand(newHookDeliveriesCommand())
	return cmd
}

// newHookDeliveriesCommand returns `berth hooks deliveries`.
func newHookDeliveriesCommand() *cobra.Command {
	var f berth.HookDeliveryFilter
	cmd := &cobra.Command{
		Use:   "deliveries",
		Short: "List hook deliveries, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return callAPI(cmd, http.MethodGet, "/v1/hooks/deliveries", bclient.HookDeliveryQuery(f), nil,
				func(w io.Writer, page *berth.HookDeliveryPage) error {
					if len(page.Deliveries) == 0 {
						_, err := fmt.Fprintln(w, "no deliveries")
						return err
					}
					if err := writeDeliveries(w, page.Deliveries); err != nil {
						return err
					}
					if page.NextCursor != "" {
						_, err := fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
						return err
					}
					return nil
				})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.State, "state", "", "only deliveries in this state: pending, failed, delivered")
	fl.StringVar(&f.SessionID, "session", "", "only deliveries about this session")
	fl.IntVar(&f.Limit, "limit", 0, "page size (default 100, at most 1000)")
	fl.StringVar(&f.Cursor, "cursor", "", "the page after this cursor")
	return cmd
}

// writeDeliveries prints deliveries as a table.
func writeDeliveries(w io.Writer, ds []*berth.HookDelivery) error {
	t := newTable(w)
	fmt.Fprintln(t, "DELIVERY\tHOOK\tEVENT\tSESSION\tSEQ\tSTATE\tTRIES\tWHEN\tLAST ERROR")
	for _, d := range ds {
		when := ago(d.CreatedAt)
		switch {
		case d.DeliveredAt != nil:
			when = "delivered " + ago(*d.DeliveredAt)
		case d.NextAttemptAt != nil && d.NextAttemptAt.After(time.Now()):
			when = "next in " + time.Until(*d.NextAttemptAt).Round(time.Second).String()
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", d.ID, d.Hook, d.Event, d.SessionID, d.Seq, d.State,
			d.Attempts, when, orDash(shorten(d.LastError, 60)))
	}
	return t.Flush()
}
