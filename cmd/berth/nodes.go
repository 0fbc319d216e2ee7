package main

import (
	"fmt"
	"io"
	"net/http"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// newNodesCommand returns `berth nodes`: the nodes sharing the daemon's
// store (docs/api.md, "Nodes").
func newNodesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "nodes",
		Short: "List the daemons (nodes) sharing this daemon's store",
		Long: "List the nodes of the cluster the daemon is part of: each one's id, the address others forward\n" +
			"writes to, whether it is up, lost or left, the sessions it drives and its last heartbeat.\n" +
			"A daemon on SQLite (or PostgreSQL without [cluster] node_id) is the only node.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type nodeList struct {
				Nodes []*berth.Node `json:"nodes"`
			}
			return callAPI(cmd, http.MethodGet, "/v1/nodes", nil, nil, func(w io.Writer, l *nodeList) error {
				t := newTable(w)
				fmt.Fprintln(t, "NODE\tSTATE\tSESSIONS\tHEARTBEAT\tADVERTISE")
				for _, n := range l.Nodes {
					fmt.Fprintf(t, "%s\t%s\t%d\t%s\t%s\n", n.ID, n.State, n.Sessions, ago(n.LastHeartbeat), orDash(n.Advertise))
				}
				return t.Flush()
			})
		},
	}
}
