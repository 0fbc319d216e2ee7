package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// newAgentsCommand returns `berth agents`: the agent catalog.
func newAgentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List the agents the daemon can run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type agentList struct {
				Agents []berth.AgentInfo `json:"agents"`
			}
			return callAPI(cmd, http.MethodGet, "/v1/agents", nil, nil, func(w io.Writer, l *agentList) error {
				t := newTable(w)
				fmt.Fprintln(t, "NAME\tAVAILABLE\tRUNS\tDESCRIPTION")
				for _, a := range l.Agents {
					// The command whole: agents installed by npm differ
					// only at the end of long paths.
					fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", a.Name, availability(a), strings.Join(append([]string{a.Command}, a.Args...), " "), shorten(a.Description, 50))
				}
				return t.Flush()
			})
		},
	}
	cmd.AddCommand(newAgentsInstallCommand())
	return cmd
}

// newAgentsInstallCommand returns `berth agents install NAME`: the npx
// agent's package fetched ahead, so that no session waits for it.
func newAgentsInstallCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "install NAME",
		Short: "Fetch an npx agent's package ahead, so that its sessions start without a download",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.ErrOrStderr(), "fetching %s's package with npm…\n", args[0])
			return callAPI(cmd, http.MethodPost, "/v1/agents/"+url.PathEscape(args[0])+"/install", nil, nil, func(w io.Writer, a *berth.AgentInfo) error {
				_, err := fmt.Fprintf(w, "installed %s: runs %s\n", a.Package, strings.Join(append([]string{a.Command}, a.Args...), " "))
				return err
			})
		},
	}
}

// availability says whether an agent can start, and for one npx runs
// whether its package is there or is downloaded at its first session.
func availability(a berth.AgentInfo) string {
	switch {
	case !a.Available:
		return "no (" + a.Command + " not found)"
	case a.Installed:
		return "yes (" + a.Package + " installed by berth)"
	case a.Fetch:
		return "yes (npx downloads " + a.Package + " at first start)"
	case a.Package != "":
		return "yes (" + a.Package + " installed)"
	}
	return "yes"
}
