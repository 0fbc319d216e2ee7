package main

import (
	"fmt"
	"io"
	"net/http"

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
				fmt.Fprintln(t, "NAME\tAVAILABLE\tCOMMAND\tDESCRIPTION")
				for _, a := range l.Agents {
					avail := "no"
					if a.Available {
						avail = "yes"
					}
					fmt.Fprintf(t, "%s\t%s\t%s\t%s\n", a.Name, avail, shorten(a.Command, 40), shorten(a.Description, 60))
				}
				return t.Flush()
			})
		},
	}
}
