package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-sh/berth"
)

// budgetFlags are --max-cost-usd and --max-tokens: a session's budgets
// (docs/api.md, "Usage and budgets") on create, run, spawn and set.
type budgetFlags struct {
	cost   float64
	tokens int64
}

// add registers the flags on fl.
func (b *budgetFlags) add(fl *pflag.FlagSet) {
	fl.Float64Var(&b.cost, "max-cost-usd", 0, "the budget in US dollars of the session's model calls, its children's included")
	fl.Int64Var(&b.tokens, "max-tokens", 0, "the budget in tokens of the session's model calls, its children's included")
}

// fill sets the budgets given on fl; those not given stay nil.
func (b *budgetFlags) fill(fl *pflag.FlagSet, cost **float64, tokens **int64) {
	if fl.Changed("max-cost-usd") {
		*cost = new(b.cost)
	}
	if fl.Changed("max-tokens") {
		*tokens = new(b.tokens)
	}
}

// newUsageCommand returns `berth usage [ID]`: one session's usage of the
// model gateway, its own and its subtree's, with its budgets; or, without
// ID, every session's and their total, or each agent's with --by agent.
func newUsageCommand() *cobra.Command {
	var (
		by     string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "usage [ID] [--by session|agent|upstream] [--json]",
		Short: "Show the model calls, tokens and cost of a session, or of every session",
		Long: "Show what the agents' model calls through berth's model gateway used: one session's own usage,\n" +
			"its subtree's and its budgets; without ID, every session's own usage (stopped ones included) and\n" +
			"the total, by session or by agent. --by upstream adds up the model_call events of the session\n" +
			"(or of every session) by upstream and model. -o json prints the API's JSON unchanged: the\n" +
			"sessions, or with --by upstream the model_call events, one a line.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				if err := cmd.Flag("output").Value.Set(outputJSON); err != nil {
					return err
				}
			}
			switch by {
			case "session", "agent":
			case "upstream":
				return upstreamUsage(cmd, args)
			default:
				return usagef(cmd, "--by wants session, agent or upstream, not %q", by)
			}
			if len(args) == 1 {
				return callAPI(cmd, http.MethodGet, sessionPath(args[0], ""), nil, nil, writeUsage)
			}
			return listUsage(cmd, by)
		},
	}
	cmd.Flags().StringVar(&by, "by", "session", "one row per session or per agent (without ID), or per upstream and model")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the same as -o json")
	return cmd
}

// writeUsage prints one session's usage as aligned "key: value" lines.
func writeUsage(w io.Writer, s *berth.Session) error {
	t := newTable(w)
	fmt.Fprintf(t, "id:\t%s\n", s.ID)
	fmt.Fprintf(t, "status:\t%s\n", statusText(s))
	fmt.Fprintf(t, "own:\t%s\n", usageText(s.Usage))
	if s.Usage.Tree != nil {
		fmt.Fprintf(t, "with its subtree:\t%s\n", usageText(*s.Usage.Tree))
	}
	budget := "none"
	switch {
	case s.MaxCostUSD != nil && s.MaxTokens != nil:
		budget = berth.FormatUSD(*s.MaxCostUSD) + ", " + strconv.FormatInt(*s.MaxTokens, 10) + " tokens"
	case s.MaxCostUSD != nil:
		budget = berth.FormatUSD(*s.MaxCostUSD)
	case s.MaxTokens != nil:
		budget = strconv.FormatInt(*s.MaxTokens, 10) + " tokens"
	}
	fmt.Fprintf(t, "budget:\t%s\n", budget)
	return t.Flush()
}

// usageText is a usage on one line.
func usageText(u berth.Usage) string {
	return fmt.Sprintf("%d calls, %d tokens (input %d, output %d, cache read %d, cache write %d), %s",
		u.ModelCalls, u.Tokens(), u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, usd(u.CostUSD))
}

// usd is an amount of US dollars to the cent, or to a tenth of a cent below
// one cent.
func usd(v float64) string {
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// upstreamUsage prints the model calls of the session args names (of
// every session without one) added up by upstream and model, read from
// their model_call events, and the total.
func upstreamUsage(cmd *cobra.Command, args []string) error {
	asJSON, c, err := dialFor(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ids := args
	if len(ids) == 0 {
		var f berth.SessionFilter
		for range maxListPages {
			page, err := c.ListSessions(cmd.Context(), f)
			if err != nil {
				return err
			}
			for _, s := range page.Sessions {
				ids = append(ids, s.ID)
			}
			if page.NextCursor == "" || page.NextCursor == f.Cursor {
				break
			}
			f.Cursor = page.NextCursor
		}
	}
	out := cmd.OutOrStdout()
	type row struct {
		upstream, model string
		u               berth.Usage
	}
	var rows []*row
	byKey := map[[2]string]*row{}
	for _, id := range ids {
		var after int64
		for range maxListPages {
			evs, err := c.ListEvents(cmd.Context(), id, berth.EventFilter{After: after, Limit: berth.MaxEventLimit, Type: berth.EventModelCall})
			if err != nil {
				return err
			}
			if len(evs) == 0 {
				break
			}
			after = evs[len(evs)-1].Seq
			for _, ev := range evs {
				if asJSON {
					b, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					if err := printRaw(out, b); err != nil {
						return err
					}
					continue
				}
				var d berth.ModelCallData
				if json.Unmarshal(ev.Data, &d) != nil {
					continue
				}
				key := [2]string{d.Upstream, d.Model}
				r := byKey[key]
				if r == nil {
					r = &row{upstream: d.Upstream, model: d.Model}
					byKey[key] = r
					rows = append(rows, r)
				}
				r.u.Add(d.Usage())
			}
		}
	}
	if asJSON {
		return nil
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].upstream != rows[j].upstream {
			return rows[i].upstream < rows[j].upstream
		}
		return rows[i].model < rows[j].model
	})
	t := newTable(out)
	fmt.Fprintln(t, "UPSTREAM\tMODEL\tCALLS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST")
	var total berth.Usage
	line := func(upstream, model string, u berth.Usage) {
		fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", printable(upstream), model, u.ModelCalls,
			u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, usd(u.CostUSD))
	}
	for _, r := range rows {
		line(r.upstream, orDash(shorten(r.model, 40)), r.u)
		total.Add(r.u)
	}
	line("TOTAL", "", total)
	return t.Flush()
}

// listUsage prints every session's own usage (its row's key: the session,
// or its agent) and the total. A session's tree usage is not summed: its
// descendants have rows of their own.
func listUsage(cmd *cobra.Command, by string) error {
	asJSON, c, err := dialFor(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	raws, sessions, err := fetchSessions(cmd, c, berth.SessionFilter{}, true)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if asJSON {
		return printSessionsJSON(out, raws)
	}
	type row struct {
		key    string
		status string
		u      berth.Usage
	}
	var rows []*row
	byKey := map[string]*row{}
	var total berth.Usage
	for i := range sessions {
		s := &sessions[i]
		key, status := s.ID, statusText(s)
		if by == "agent" {
			key, status = s.Agent, ""
		}
		r := byKey[key]
		if r == nil {
			r = &row{key: key, status: status}
			byKey[key] = r
			rows = append(rows, r)
		}
		r.u.Add(s.Usage)
		total.Add(s.Usage)
	}
	if by == "agent" {
		sort.Slice(rows, func(i, j int) bool { return rows[i].key < rows[j].key })
	}
	t := newTable(out)
	head := "SESSION\tSTATUS"
	if by == "agent" {
		head = "AGENT\t"
	}
	fmt.Fprintln(t, head+"\tCALLS\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tCOST")
	line := func(key, status string, u berth.Usage) {
		fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", printable(key), status, u.ModelCalls, u.InputTokens, u.OutputTokens,
			u.CacheReadTokens, u.CacheWriteTokens, usd(u.CostUSD))
	}
	for _, r := range rows {
		line(r.key, r.status, r.u)
	}
	line("TOTAL", "", total)
	return t.Flush()
}
