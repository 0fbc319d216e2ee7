package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// newAgentsCommand returns `berth agents`: the agent catalog.
func newAgentsCommand() *cobra.Command {
	return &cobra.Command{
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
}

// availability says whether an agent can start, and for one npx runs
// whether its package is there or is downloaded at its first session.
func availability(a berth.AgentInfo) string {
	switch {
	case !a.Available:
		return "no (" + a.Command + " not found)"
	case a.Fetch:
		return "yes (npx downloads " + a.Package + " at first start)"
	case a.Package != "":
		return "yes (" + a.Package + " installed)"
	}
	return "yes"
}
