package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

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
	return sessionCommand("resume ID", "Resume a stopped session in its workspace", http.MethodPost, "/resume",
		func(w io.Writer, _ string, s *berth.Session) error {
			_, err := fmt.Fprintf(w, "resumed %s (%s)\n", s.ID, s.State)
			return err
		})
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
	return askList("permissions", "List a session's permission requests", "only the requests waiting for a decision",
		"PERMISSION\tSTATE\tBY\tOPTION\tTOOL CALL", func(p *berth.Permission) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p.ID, p.State, orDash(p.DecidedBy), optionText(p), shorten(toolTitle(p), 50))
		})
}

// askList returns `berth NOUN ID [--pending]`: a table (header's columns,
// a row of each) of what the agent of a session asked, GET …/NOUN; with
// --pending only what waits for an answer (?state=pending).
func askList[T any](noun, short, pendingHelp, header string, row func(T) string) *cobra.Command {
	var pending bool
	cmd := &cobra.Command{
		Use:   noun + " ID [--pending]",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var q url.Values
			if pending {
				q = url.Values{"state": {"pending"}}
			}
			return callAPI(cmd, http.MethodGet, sessionPath(args[0], "/"+noun), q, nil, func(w io.Writer, l *map[string]json.RawMessage) error {
				var items []T
				if raw, ok := (*l)[noun]; ok {
					if err := json.Unmarshal(raw, &items); err != nil {
						return fmt.Errorf("the daemon's answer does not decode: %w", err)
					}
				}
				t := newTable(w)
				fmt.Fprintln(t, header)
				for _, it := range items {
					fmt.Fprintln(t, row(it))
				}
				return t.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&pending, "pending", false, pendingHelp)
	return cmd
}

// optionText is the option a decided permission took, or for a pending
// one every option id it offers with its name, as approve --option takes
// them ("allow (Allow once) | reject (Reject)").
func optionText(p *berth.Permission) string {
	if p.State != berth.PermissionPending {
		return orDash(p.OptionID)
	}
	var opts []string
	for _, o := range p.Options {
		opts = append(opts, printable(o.ID+" ("+o.Name+")"))
	}
	return orDash(strings.Join(opts, " | "))
}

// toolTitle is the title of a permission's tool call, or its kind.
func toolTitle(p *berth.Permission) string {
	var tc struct {
		Title string `json:"title"`
		Kind  string `json:"kind"`
	}
	_ = json.Unmarshal(p.ToolCall, &tc)
	if tc.Title != "" {
		return printable(tc.Title)
	}
	return orDash(printable(tc.Kind))
}

// newExecCommand returns `berth exec ID [--timeout S] [--cwd DIR] -- cmd args…`.
func newExecCommand() *cobra.Command {
	var timeout int
	var cwd string
	cmd := &cobra.Command{
		Use:   "exec ID [--timeout S] [--cwd DIR] -- cmd args…",
		Short: "Run a command in a session's sandbox and workspace",
		Long: "Run a command in a session's sandbox, in its workspace, and print its output.\n" +
			"Exits with the command's exit code (124 when it timed out).",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := berth.ExecRequest{Command: args[1:], Cwd: cwd, TimeoutSeconds: timeout}
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), http.MethodPost, sessionPath(args[0], "/exec"), nil, req, &raw); err != nil {
				return err
			}
			var r berth.ExecResult
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("the daemon's answer does not decode: %w", err)
			}
			if asJSON {
				if err := printRaw(cmd.OutOrStdout(), raw); err != nil {
					return err
				}
			} else {
				fmt.Fprint(cmd.OutOrStdout(), r.Stdout)
				fmt.Fprint(cmd.ErrOrStderr(), r.Stderr)
			}
			switch {
			case r.TimedOut:
				return &exitError{code: 124, err: fmt.Errorf("the command timed out after %d s", req.TimeoutSeconds)}
			case r.ExitCode != 0 || r.Signal != "":
				return &exitError{code: max(1, min(r.ExitCode, 125)), err: fmt.Errorf("the command exited %d%s", r.ExitCode, signalText(r.Signal))}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&timeout, "timeout", 0, "kill the command after this many seconds (default 60)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "directory inside the workspace to run in")
	return cmd
}

// signalText says which signal ended a command, if any.
func signalText(sig string) string {
	if sig == "" {
		return ""
	}
	return " (" + sig + ")"
}

// newSnapshotCommand returns `berth snapshot ID [--list]`.
func newSnapshotCommand() *cobra.Command {
	var list bool
	cmd := &cobra.Command{
		Use:   "snapshot ID [--list]",
		Short: "Archive a session's workspace (berth create --from-snapshot SNAP starts a session from it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := sessionPath(args[0], "/snapshots")
			if list {
				type snapshots struct {
					Snapshots []*berth.Snapshot `json:"snapshots"`
				}
				return callAPI(cmd, http.MethodGet, path, nil, nil, func(w io.Writer, l *snapshots) error {
					t := newTable(w)
					fmt.Fprintln(t, "SNAPSHOT\tSIZE\tFILES\tCREATED")
					for _, s := range l.Snapshots {
						fmt.Fprintf(t, "%s\t%d\t%d\t%s\n", s.ID, s.SizeBytes, s.Files, s.CreatedAt.Format(time.RFC3339))
					}
					return t.Flush()
				})
			}
			return callAPI(cmd, http.MethodPost, path, nil, nil, func(w io.Writer, s *berth.Snapshot) error {
				_, err := fmt.Fprintf(w, "%s (%d bytes, %d files)\n", s.ID, s.SizeBytes, s.Files)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "list the session's snapshots instead")
	return cmd
}

// newRepairCommand returns `berth repair ID [--dry-run] [--force]`.
func newRepairCommand() *cobra.Command {
	var dryRun, force bool
	cmd := &cobra.Command{
		Use:   "repair ID [--dry-run] [--force]",
		Short: "Check a stopped session's log and close what was left open",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if dryRun {
				q.Set("dry_run", "true")
			}
			if force {
				q.Set("force", "true")
			}
			return callAPI(cmd, http.MethodPost, sessionPath(args[0], "/repair"), q, nil, func(w io.Writer, r *berth.RepairReport) error {
				for _, i := range r.Issues {
					fmt.Fprintf(w, "issue   %-24s %s\n", i.Kind, i.Message)
				}
				verb := "planned"
				if r.Persisted {
					verb = "done"
				}
				for _, a := range r.Actions {
					fmt.Fprintf(w, "%-7s %-24s %s\n", verb, a.Event, a.Message)
				}
				if len(r.Issues) == 0 {
					fmt.Fprintln(w, "nothing to repair")
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be done, change nothing")
	cmd.Flags().BoolVar(&force, "force", false, "repair a session its user stopped")
	return cmd
}

// newClearCommand returns `berth clear ID [--cancel]`.
func newClearCommand() *cobra.Command {
	var cancel bool
	cmd := &cobra.Command{
		Use:   "clear ID [--cancel]",
		Short: "Start a new agent conversation in the session's workspace (pending prompts are dropped)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var q url.Values
			if cancel {
				q = url.Values{"cancel": {"true"}}
			}
			return callAPI(cmd, http.MethodPost, sessionPath(args[0], "/clear"), q, nil, func(w io.Writer, s *berth.Session) error {
				_, err := fmt.Fprintf(w, "cleared %s: new conversation %s\n", s.ID, s.ACP.SessionID)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the turn in flight first (else a busy session is refused)")
	return cmd
}
