package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// newApproveCommand returns `berth approve ID PERM [--option ID | --reject]`.
func newApproveCommand() *cobra.Command {
	var option string
	var reject bool
	cmd := &cobra.Command{
		Use:   "approve ID PERM [--option ID | --reject]",
		Short: "Answer a pending permission request (allow once unless told otherwise)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := berth.PermissionDecision{Decision: berth.DecisionAllowOnce}
			switch {
			case option != "" && reject:
				return usagef(cmd, "--option and --reject exclude each other")
			case option != "":
				d = berth.PermissionDecision{OptionID: option}
			case reject:
				d = berth.PermissionDecision{Decision: berth.DecisionRejectOnce}
			}
			path := sessionPath(args[0], "/permissions/"+url.PathEscape(args[1]))
			return callAPI(cmd, http.MethodPost, path, nil, d, func(w io.Writer, p *berth.Permission) error {
				_, err := fmt.Fprintf(w, "%s: %s (option %s)\n", p.ID, p.State, orDash(p.OptionID))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&option, "option", "", "the id of the option to select")
	cmd.Flags().BoolVar(&reject, "reject", false, "reject the request once")
	return cmd
}

// newResumeCommand returns `berth resume ID`.
func newResumeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "resume ID",
		Short: "Resume a stopped session in its workspace",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return callAPI(cmd, http.MethodPost, sessionPath(args[0], "/resume"), nil, nil, func(w io.Writer, s *berth.Session) error {
				_, err := fmt.Fprintf(w, "resumed %s (%s)\n", s.ID, s.State)
				return err
			})
		},
	}
}

// newQueueCommand returns `berth queue ID [--drop ENTRY]`.
func newQueueCommand() *cobra.Command {
	var drop string
	cmd := &cobra.Command{
		Use:   "queue ID [--drop ENTRY]",
		Short: "List a session's pending prompts, or drop one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if drop != "" {
				path := sessionPath(args[0], "/queue/"+url.PathEscape(drop))
				return callAPI(cmd, http.MethodDelete, path, nil, nil, func(w io.Writer, _ *struct{}) error {
					_, err := fmt.Fprintf(w, "dropped %s\n", drop)
					return err
				})
			}
			return callAPI(cmd, http.MethodGet, sessionPath(args[0], "/queue"), nil, nil, func(w io.Writer, q *berth.QueueView) error {
				t := newTable(w)
				fmt.Fprintln(t, "ENTRY\tKIND\tPOSITION\tTEXT")
				for _, e := range q.Entries {
					fmt.Fprintf(t, "%s\t%s\t%d\t%s\n", e.ID, e.Kind, e.Position, shorten(e.Text, 60))
				}
				return t.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&drop, "drop", "", "drop this pending entry")
	return cmd
}

// newPermissionsCommand returns `berth permissions ID [--pending]`.
func newPermissionsCommand() *cobra.Command {
	var pending bool
	cmd := &cobra.Command{
		Use:   "permissions ID [--pending]",
		Short: "List a session's permission requests",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var q url.Values
			if pending {
				q = url.Values{"state": {berth.PermissionPending}}
			}
			type list struct {
				Permissions []*berth.Permission `json:"permissions"`
			}
			return callAPI(cmd, http.MethodGet, sessionPath(args[0], "/permissions"), q, nil, func(w io.Writer, l *list) error {
				t := newTable(w)
				fmt.Fprintln(t, "PERMISSION\tSTATE\tBY\tOPTION\tTOOL CALL")
				for _, p := range l.Permissions {
					fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", p.ID, p.State, orDash(p.DecidedBy), orDash(p.OptionID), shorten(toolTitle(p), 50))
				}
				return t.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&pending, "pending", false, "only the requests waiting for a decision")
	return cmd
}

// toolTitle is the title of a permission's tool call, or its kind.
func toolTitle(p *berth.Permission) string {
	var tc struct {
		Title string `json:"title"`
		Kind  string `json:"kind"`
	}
	_ = json.Unmarshal(p.ToolCall, &tc)
	if tc.Title != "" {
		return tc.Title
	}
	return orDash(tc.Kind)
}
