package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/spf13/cobra"

	bclient "github.com/berth-sh/berth/client"
)

// maxListPages bounds how many pages `berth ls` follows.
const maxListPages = 1000

// newLsCommand returns `berth ls`: the sessions, live ones only unless
// --all or --state says otherwise.
func newLsCommand() *cobra.Command {
	var (
		all    bool
		quiet  bool
		state  string
		agent  string
		labels []string
	)
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sessions (stopped ones only with --all)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := berth.SessionFilter{State: berth.State(state), Agent: agent}
			for _, kv := range labels {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef(cmd, "--label wants key=value, not %q", kv)
				}
				if f.Labels == nil {
					f.Labels = map[string]string{}
				}
				f.Labels[k] = v
			}
			return listSessions(cmd, f, all || state != "", quiet)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&all, "all", "a", false, "include stopped sessions")
	fl.BoolVarP(&quiet, "quiet", "q", false, "print only the session ids, one a line")
	fl.StringVar(&state, "state", "", "only sessions in this state: starting, active, stopping, stopped")
	fl.StringVar(&agent, "agent", "", "only sessions of this agent")
	fl.StringArrayVar(&labels, "label", nil, "only sessions with this label, key=value (repeatable)")
	return cmd
}

// listSessions prints every session matching f, following the pages;
// stopped sessions only when withStopped; their ids alone when quiet.
func listSessions(cmd *cobra.Command, f berth.SessionFilter, withStopped, quiet bool) error {
	asJSON, c, err := dialFor(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	raws, sessions, err := fetchSessions(cmd, c, f, withStopped)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch {
	case quiet:
		// As create -q: ids for a script, -o json or not.
		for _, s := range sessions {
			if _, err := fmt.Fprintln(out, s.ID); err != nil {
				return err
			}
		}
		return nil
	case asJSON:
		return printSessionsJSON(out, raws)
	}
	// A cluster's sessions say which node runs them.
	clustered := slices.ContainsFunc(sessions, func(s berth.Session) bool { return s.Node != "" })
	t := newTable(out)
	if clustered {
		fmt.Fprintln(t, "ID\tNAME\tAGENT\tSTATUS\tNODE\tTURNS\tACTIVE\tLABELS")
	} else {
		fmt.Fprintln(t, "ID\tNAME\tAGENT\tSTATUS\tTURNS\tACTIVE\tLABELS")
	}
	// Children are indented under their parent.
	order, depth := treeOrder(sessions)
	for n, i := range order {
		s := &sessions[i]
		status := statusText(s)
		if clustered {
			status += "\t" + orDash(printable(s.Node))
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", treeID(s.ID, depth[n]), orDash(shorten(s.Name, 30)), s.Agent, status,
			s.Turns, ago(s.LastActivityAt), labelsText(s.Labels))
	}
	return t.Flush()
}

// fetchSessions reads every page of the sessions f matches (at most
// maxListPages), leaving out stopped ones unless withStopped. It keeps each
// session's raw JSON too, so that --json prints what the daemon sent.
func fetchSessions(cmd *cobra.Command, c *bclient.Client, f berth.SessionFilter, withStopped bool) ([]json.RawMessage, []berth.Session, error) {
	var (
		raws     []json.RawMessage
		sessions []berth.Session
	)
	for range maxListPages {
		var page struct {
			Sessions   []json.RawMessage `json:"sessions"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := c.Do(cmd.Context(), http.MethodGet, "/v1/sessions", bclient.SessionQuery(f), nil, &page); err != nil {
			return nil, nil, err
		}
		for _, raw := range page.Sessions {
			var s berth.Session
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, nil, fmt.Errorf("the daemon sent a session that does not decode: %w", err)
			}
			if s.State == berth.StateStopped && !withStopped {
				continue
			}
			raws, sessions = append(raws, raw), append(sessions, s)
		}
		if page.NextCursor == "" || page.NextCursor == f.Cursor {
			break
		}
		f.Cursor = page.NextCursor
	}
	return raws, sessions, nil
}

// printSessionsJSON prints raws as one list page with no next cursor (the
// shape of GET /v1/sessions, docs/api.md, Sessions).
func printSessionsJSON(out io.Writer, raws []json.RawMessage) error {
	if raws == nil {
		raws = []json.RawMessage{}
	}
	b, err := json.Marshal(struct {
		Sessions   []json.RawMessage `json:"sessions"`
		NextCursor string            `json:"next_cursor"`
	}{raws, ""})
	if err != nil {
		return err
	}
	return printRaw(out, b)
}

// statusText is the badge, with the stop reason of a stopped session.
func statusText(s *berth.Session) string {
	badge := string(s.Badge)
	if badge == "" {
		badge = string(s.State)
	}
	if s.State == berth.StateStopped && s.StopReason != "" {
		return badge + " (" + string(s.StopReason) + ")"
	}
	return badge
}

// newShowCommand returns `berth show ID`: one session in detail.
func newShowCommand() *cobra.Command {
	return sessionCommand("show ID", "Show one session", http.MethodGet, "",
		func(w io.Writer, _ string, s *berth.Session) error { return writeSession(w, s) })
}

// writeSession prints a session as aligned "key: value" lines.
func writeSession(w io.Writer, s *berth.Session) error {
	t := newTable(w)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(t, "%s:\t%s\n", k, printable(v))
		}
	}
	when := func(at time.Time) string {
		if at.IsZero() {
			return ""
		}
		return at.Local().Format(time.RFC3339) + " (" + ago(at) + ")"
	}
	row("id", s.ID)
	row("name", s.Name)
	row("title", s.Title)
	row("agent", s.Agent)
	row("state", string(s.State))
	row("status", statusText(s))
	row("node", s.Node)
	if s.Failure != nil {
		row("failure", s.Failure.Kind+": "+s.Failure.Message)
	}
	if s.Auth != nil && s.Auth.Missing != "" {
		row("needs", fmt.Sprintf("the credential %q, which is not set: berth credentials set %s", s.Auth.Missing, s.Auth.Missing))
	}
	row("spend", spendText(s))
	ws := s.Workspace
	if s.ManagedWorkspace {
		ws += " (managed)"
	}
	row("workspace", ws)
	if w := s.Worktree; w != nil {
		row("worktree", fmt.Sprintf("%s, branch %s from %s", w.Repo, w.Branch, w.Base))
	}
	row("mounts", strings.Join(s.Mounts, ", "))
	net := "no network"
	switch p := s.Sandbox.NetworkPolicy; {
	case s.Sandbox.Network:
		net = "network"
	case p != nil:
		net = "network only to " + orDash(strings.Join(p.Allow, " "))
		if p.Ask {
			net += " (asks for others)"
		}
	}
	row("sandbox", orDash(s.Sandbox.Provider)+", "+net+limitsText(s.Sandbox.Limits))
	row("permissions", s.PermissionMode)
	row("parent", s.ParentID)
	if s.ParentID != "" {
		row("root", s.RootID)
		row("depth", fmt.Sprint(s.Depth))
	}
	if s.ForkedFrom != nil {
		row("forked from", s.ForkedFrom.SessionID+" at "+s.ForkedFrom.CheckpointID)
	}
	if len(s.Labels) > 0 {
		row("labels", labelsText(s.Labels))
	}
	for _, r := range controlsRows(s) {
		row(r[0], r[1])
	}
	row("mcp servers", mcpServersText(s.MCPServers))
	if ms := acp.AuthMethodsOf(s.ACP.AuthMethods); len(ms) > 0 {
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		row("auth methods", strings.Join(ids, ", "))
	}
	row("created", when(s.CreatedAt))
	row("last activity", when(s.LastActivityAt))
	if s.ExpiresAt != nil {
		row("expires", when(*s.ExpiresAt))
	}
	row("turns", fmt.Sprint(s.Turns))
	row("current turn", s.CurrentTurnID)
	row("queue", fmt.Sprintf("%d pending", s.Queue.Pending))
	row("pending permissions", fmt.Sprint(s.PendingPermissions))
	if s.PendingElicitations > 0 {
		row("pending questions", fmt.Sprint(s.PendingElicitations))
	}
	row("last seq", fmt.Sprint(s.LastSeq))
	if s.State == berth.StateStopped {
		row("resumable", fmt.Sprint(s.Resumable))
	}
	return t.Flush()
}

// spendText is what a session's model calls used and what is left of its
// budgets; "" before its first call and with none.
func spendText(s *berth.Session) string {
	u := s.Usage
	if u.ModelCalls == 0 && s.MaxCostUSD == nil && s.MaxTokens == nil {
		return ""
	}
	text := fmt.Sprintf("%s, %d tokens in %d model calls", berth.FormatUSD(u.CostUSD), u.Tokens(), u.ModelCalls)
	if limit, _ := s.Exceeded(); limit != "" {
		return text + "; over budget"
	}
	tree := u.Total()
	if s.MaxCostUSD != nil {
		text += "; " + berth.FormatUSD(*s.MaxCostUSD-tree.CostUSD) + " left"
	}
	if s.MaxTokens != nil {
		text += fmt.Sprintf("; %d tokens left", *s.MaxTokens-tree.Tokens())
	}
	return text
}

// mcpServersText names a session's MCP servers with their transports:
// "files (stdio), docs (http)".
func mcpServersText(l berth.MCPServers) string {
	parts := make([]string, len(l))
	for i, m := range l {
		parts[i] = m.Name + " (" + m.Transport() + ")"
	}
	return strings.Join(parts, ", ")
}

// newStopCommand returns `berth stop ID`.
func newStopCommand() *cobra.Command {
	return sessionCommand("stop ID", "Stop a session (its workspace and log stay)", http.MethodPost, "/stop",
		func(w io.Writer, _ string, s *berth.Session) error {
			_, err := fmt.Fprintf(w, "stopped %s (%s)\n", s.ID, orDash(string(s.StopReason)))
			return err
		})
}

// newRmCommand returns `berth rm ID`.
func newRmCommand() *cobra.Command {
	return sessionCommand("rm ID", "Stop a session, then delete its log and managed workspace", http.MethodDelete, "",
		func(w io.Writer, id string, _ *struct{}) error {
			_, err := fmt.Fprintf(w, "deleted %s\n", id)
			return err
		})
}

// limitsText is a sandbox's limits for `berth show` (", memory 96 MiB,
// /tmp 64 MiB"); "" when none is recorded.
func limitsText(l berth.SandboxLimitsInfo) string {
	if l == (berth.SandboxLimitsInfo{}) {
		return ""
	}
	out := ", memory "
	if l.MemoryMB > 0 {
		out += fmt.Sprintf("%d MiB", l.MemoryMB)
	} else {
		out += "unbounded"
	}
	if l.TmpMB > 0 {
		out += fmt.Sprintf(", /tmp %d MiB", l.TmpMB)
	}
	return out
}
