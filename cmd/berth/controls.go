package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// newSetCommand returns `berth set ID`: PATCH /v1/sessions/{id} (docs/api.md,
// "Agent controls"), printed as `berth show` prints the session.
func newSetCommand() *cobra.Command {
	var (
		mode, model, name string
		config, labels    []string
		budget            budgetFlags
	)
	cmd := &cobra.Command{
		Use:   "set ID [--mode M] [--model M] [--config K=V]... [--name N] [--label K=V]... [--max-cost-usd X] [--max-tokens N]",
		Short: "Change a session's name, labels, budgets, or its agent's mode, model and config options",
		Long: "Change a session: --name, --label and the budgets are berth's own (--label K= removes K); --mode, --model and\n" +
			"--config go to the agent, which must be running and offer the value (see `berth show ID` and the\n" +
			"session's acp object).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p berth.SessionPatch
			fl := cmd.Flags()
			if fl.Changed("name") {
				p.Name = &name
			}
			p.Mode, p.Model = mode, model
			budget.fill(fl, &p.MaxCostUSD, &p.MaxTokens)
			kv, err := keyValues(cmd, "--label", labels)
			if err != nil {
				return err
			}
			for k, v := range kv {
				if p.Labels == nil {
					p.Labels = map[string]*string{}
				}
				if v == "" {
					p.Labels[k] = nil
					continue
				}
				p.Labels[k] = &v
			}
			cfg, err := keyValues(cmd, "--config", config)
			if err != nil {
				return err
			}
			for k, v := range cfg {
				if p.Config == nil {
					p.Config = map[string]json.RawMessage{}
				}
				// The daemon takes "true"/"false" for a boolean option too.
				b, _ := json.Marshal(v)
				p.Config[k] = b
			}
			if p.Empty() {
				return usagef(cmd, "nothing to change: give --mode, --model, --config, --name, --label, --max-cost-usd or --max-tokens")
			}
			return callAPI(cmd, http.MethodPatch, sessionPath(args[0], ""), nil, p, writeSession)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&mode, "mode", "", "the agent's mode (one it offers)")
	fl.StringVar(&model, "model", "", "the agent's model (one it offers)")
	fl.StringArrayVar(&config, "config", nil, "an agent config option, ID=VALUE (repeatable)")
	fl.StringVar(&name, "name", "", "the session's name")
	fl.StringArrayVar(&labels, "label", nil, "a label, KEY=VALUE; KEY= removes it (repeatable)")
	budget.add(fl)
	return cmd
}

// newCommandsCommand returns `berth commands ID`: the slash commands the
// session's agent offers (-o json: the acp.commands array as the API has it).
func newCommandsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "commands ID",
		Short: "List the slash commands a session's agent offers",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var s struct {
				ACP struct {
					Commands json.RawMessage `json:"commands"`
				} `json:"acp"`
			}
			if err := c.Do(cmd.Context(), http.MethodGet, sessionPath(args[0], ""), nil, nil, &s); err != nil {
				return err
			}
			raw := s.ACP.Commands
			if len(raw) == 0 {
				raw = json.RawMessage("[]")
			}
			if asJSON {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			var cmds []berth.ACPCommand
			if err := json.Unmarshal(raw, &cmds); err != nil {
				return fmt.Errorf("the daemon's answer does not decode: %w", err)
			}
			return writeCommands(cmd.OutOrStdout(), cmds)
		},
	}
}

// writeCommands prints slash commands as a table.
func writeCommands(w io.Writer, cmds []berth.ACPCommand) error {
	if len(cmds) == 0 {
		_, err := fmt.Fprintln(w, "the agent offers no commands")
		return err
	}
	t := newTable(w)
	fmt.Fprintln(t, "COMMAND\tDESCRIPTION\tINPUT")
	for _, c := range cmds {
		fmt.Fprintf(t, "/%s\t%s\t%s\n", printable(c.Name), printable(c.Description), printable(orDash(c.InputHint)))
	}
	return t.Flush()
}

// controlsRows returns the `berth show` lines for an agent's controls.
func controlsRows(s *berth.Session) [][2]string {
	var rows [][2]string
	if m := s.ACP.Modes; m != nil {
		mode := m.Current
		if m.SetBy == "berth" {
			// Why the agent is not in the mode it opened in (docs/api.md, "The asking mode").
			mode += " (set by berth: in " + m.ForcedFrom + " the agent answers permissions by itself)"
		}
		rows = append(rows, [2]string{"mode", mode + offeredText(len(m.Available), func(i int) string { return m.Available[i].ID })})
	}
	if m := s.ACP.Models; m != nil {
		rows = append(rows, [2]string{"model", m.Current + offeredText(len(m.Available), func(i int) string { return m.Available[i].ID })})
	}
	var cfg []string
	for _, o := range s.ACP.ConfigOptions {
		if o.Category == "model" || o.Category == "mode" {
			continue
		}
		cfg = append(cfg, o.ID+"="+strings.Trim(string(o.Current), `"`))
	}
	if len(cfg) > 0 {
		rows = append(rows, [2]string{"config", strings.Join(cfg, " ")})
	}
	if len(s.ACP.Commands) > 0 {
		names := make([]string, len(s.ACP.Commands))
		for i, c := range s.ACP.Commands {
			names[i] = "/" + c.Name
		}
		rows = append(rows, [2]string{"commands", strings.Join(names, " ")})
	}
	return rows
}

// offeredText is " (of a, b)" listing what an agent offers.
func offeredText(n int, id func(int) string) string {
	if n == 0 {
		return ""
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = id(i)
	}
	return " (of " + strings.Join(ids, ", ") + ")"
}
