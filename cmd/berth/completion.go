package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
)

// completionTimeout bounds how long a shell's Tab waits for the daemon.
const completionTimeout = 2 * time.Second

// maxCompletedSessions bounds the ids offered at one Tab (the newest first).
const maxCompletedSessions = 500

// addSessionCompletion makes every command whose first argument is a
// session (its Use reads "name ID …" or "name PARENT …") complete it with
// the ids of the daemon's sessions, for the scripts `berth completion
// bash|zsh|fish` prints.
func addSessionCompletion(cmd *cobra.Command) {
	if f := strings.Fields(cmd.Use); cmd.ValidArgsFunction == nil && len(f) > 1 && (f[1] == "ID" || f[1] == "PARENT") {
		cmd.ValidArgsFunction = completeSessionIDs
	}
	for _, sub := range cmd.Commands() {
		addSessionCompletion(sub)
	}
}

// completeSessionIDs offers the ids of the sessions that start with what
// was typed, each described by its name, agent and status. A daemon that
// does not answer offers nothing (and never files).
func completeSessionIDs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := dial(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	var out []string
	f := berth.SessionFilter{Limit: maxCompletedSessions}
	page, err := c.ListSessions(ctx, f)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	for _, s := range page.Sessions {
		if !strings.HasPrefix(s.ID, toComplete) {
			continue
		}
		desc := s.Agent + ", " + statusText(s)
		if s.Name != "" {
			desc = shorten(s.Name, 30) + " (" + desc + ")"
		}
		out = append(out, s.ID+"\t"+desc)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
