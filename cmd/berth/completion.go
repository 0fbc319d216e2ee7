package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
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
	return askDaemon(cmd, func(ctx context.Context, c *bclient.Client) ([]string, error) {
		page, err := c.ListSessions(ctx, berth.SessionFilter{Limit: maxCompletedSessions})
		if err != nil {
			return nil, err
		}
		var out []string
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
		return out, nil
	})
}

// askDaemon runs ask against the daemon within completionTimeout and
// offers what it returns; a daemon that does not answer offers nothing
// (and never files).
func askDaemon(cmd *cobra.Command, ask func(ctx context.Context, c *bclient.Client) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	c, err := dial(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	out, err := ask(ctx, c)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// addFlagCompletion makes the flags that take a known value complete it,
// in every command that has them: --agent with the daemon's agents,
// --permissions (and its old name --mode where it is one) with the
// permission modes, and set's --mode and --model with what the session
// on the line offers.
func addFlagCompletion(cmd *cobra.Command) {
	fl := cmd.Flags()
	if fl.Lookup("agent") != nil {
		_ = cmd.RegisterFlagCompletionFunc("agent", completeAgents)
	}
	if fl.Lookup("permissions") != nil {
		_ = cmd.RegisterFlagCompletionFunc("permissions", completePermissionModes)
		if fl.Lookup("mode") != nil {
			_ = cmd.RegisterFlagCompletionFunc("mode", completePermissionModes)
		}
	} else if fl.Lookup("mode") != nil && fl.Lookup("model") != nil {
		_ = cmd.RegisterFlagCompletionFunc("mode", completeSessionControl(modesOffered))
		_ = cmd.RegisterFlagCompletionFunc("model", completeSessionControl(modelsOffered))
	}
	for _, sub := range cmd.Commands() {
		addFlagCompletion(sub)
	}
}

// completeAgents offers the daemon's agents, described.
func completeAgents(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return askDaemon(cmd, func(ctx context.Context, c *bclient.Client) ([]string, error) {
		agents, err := c.Agents(ctx)
		var out []string
		for _, a := range agents {
			if strings.HasPrefix(a.Name, toComplete) {
				out = append(out, a.Name+"\t"+shorten(a.Description, 60))
			}
		}
		return out, err
	})
}

// completePermissionModes offers the permission modes.
func completePermissionModes(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return permissionModes, cobra.ShellCompDirectiveNoFileComp
}

// completeSessionControl offers what offered lists of the session whose
// id is the command's first argument; nothing without one.
func completeSessionControl(offered func(*berth.Session) []string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return askDaemon(cmd, func(ctx context.Context, c *bclient.Client) ([]string, error) {
			s, err := c.GetSession(ctx, args[0])
			if err != nil {
				return nil, err
			}
			var out []string
			for _, v := range offered(s) {
				if strings.HasPrefix(v, toComplete) {
					out = append(out, v)
				}
			}
			return out, nil
		})
	}
}

// modesOffered are the ids of the modes a session's agent offers.
func modesOffered(s *berth.Session) []string {
	var out []string
	if m := s.ACP.Modes; m != nil {
		for _, a := range m.Available {
			out = append(out, a.ID)
		}
	}
	return out
}

// modelsOffered are the ids of the models a session's agent offers.
func modelsOffered(s *berth.Session) []string {
	var out []string
	if m := s.ACP.Models; m != nil {
		for _, a := range m.Available {
			out = append(out, a.ID)
		}
	}
	return out
}
