package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/berth-sh/berth"
	"github.com/spf13/cobra"
)

// defaultChildTTL is the TTL of a child spawned without --ttl: the API
// requires one.
const defaultChildTTL = time.Hour

// newSpawnCommand returns `berth spawn PARENT ["prompt"]`: a child session
// of PARENT (docs/api.md, "Children").
func newSpawnCommand() *cobra.Command {
	var (
		req     berth.CreateRequest
		ttl     time.Duration
		key     string
		workdir string
		budget  budgetFlags
	)
	cmd := &cobra.Command{
		Use:   `spawn PARENT ["prompt"]`,
		Short: "Spawn a child session of PARENT (never given more than PARENT has)",
		Long: `Spawn a child session of PARENT. The child works in PARENT's workspace
unless --workspace names a directory inside it, inherits its permission mode,
sandbox and env unless told a stricter one, stops when PARENT stops, and
stops by itself when its --ttl runs out.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ttl <= 0 {
				return usagef(cmd, "--ttl must be positive, not %s", ttl)
			}
			if secs := math.Ceil(ttl.Seconds()); secs > berth.MaxSessionSeconds {
				return usagef(cmd, "--ttl is longer than %d seconds", berth.MaxSessionSeconds)
			}
			req.TTLSeconds = int(math.Ceil(ttl.Seconds()))
			req.Workspace = workdir
			budget.fill(cmd.Flags(), &req.MaxCostUSD, &req.MaxTokens)
			if len(args) == 2 {
				req.Prompt = args[1]
			}
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if req.Agent == "" {
				// The parent's agent, unless told another.
				p, err := c.GetSession(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				req.Agent = p.Agent
			}
			raw, err := c.SpawnChildRaw(cmd.Context(), args[0], req, key)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printRaw(out, raw)
			}
			var s berth.Session
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("the daemon's answer does not decode: %w", err)
			}
			_, err = fmt.Fprintf(out, "spawned %s under %s (depth %d, %s)\n", s.ID, s.ParentID, s.Depth, statusText(&s))
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&req.Agent, "agent", "", "the child's agent, from the catalog (default: the parent's)")
	fl.StringVar(&req.Name, "name", "", "the child's name")
	fl.DurationVar(&ttl, "ttl", defaultChildTTL, "how long the child may live")
	addPermissionsFlag(fl, &req.PermissionMode, "permission mode, no looser than the parent's (default: the parent's)")
	fl.StringVar(&req.Sandbox, "sandbox", "", "sandbox provider, no weaker than the parent's (default: the parent's)")
	fl.StringVar(&workdir, "workspace", "", "a directory inside the parent's workspace (default: the parent's workspace)")
	fl.StringVar(&key, "idempotency-key", "", "a retry with the same key answers the same child")
	budget.add(fl)
	return cmd
}

// newChildrenCommand returns `berth children ID`: the session's children.
func newChildrenCommand() *cobra.Command {
	return sessionCommand("children ID", "List a session's children", http.MethodGet, "/children",
		func(w io.Writer, _ string, page *berth.SessionPage) error {
			t := newTable(w)
			fmt.Fprintln(t, "ID\tNAME\tAGENT\tSTATUS\tTURNS\tACTIVE\tEXPIRES")
			for _, s := range page.Sessions {
				exp := "-"
				if s.ExpiresAt != nil && s.State != berth.StateStopped {
					exp = "in " + time.Until(*s.ExpiresAt).Round(time.Second).String()
				}
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, orDash(shorten(s.Name, 30)), s.Agent, statusText(s),
					s.Turns, ago(s.LastActivityAt), exp)
			}
			return t.Flush()
		})
}

// treeOrder orders sessions as a tree: each one followed by its children
// (those on the list), each at its depth below the first shown ancestor.
// The list's own order holds among siblings; a session whose parent is
// not on the list starts a tree of its own.
func treeOrder(sessions []berth.Session) (order []int, depth []int) {
	index := make(map[string]int, len(sessions))
	for i, s := range sessions {
		index[s.ID] = i
	}
	kids := make(map[string][]int)
	var roots []int
	for i, s := range sessions {
		if _, ok := index[s.ParentID]; s.ParentID != "" && ok && s.ParentID != s.ID {
			kids[s.ParentID] = append(kids[s.ParentID], i)
			continue
		}
		roots = append(roots, i)
	}
	seen := make([]bool, len(sessions))
	var walk func(i, d int)
	walk = func(i, d int) {
		if seen[i] {
			return
		}
		seen[i] = true
		order, depth = append(order, i), append(depth, d)
		for _, k := range kids[sessions[i].ID] {
			walk(k, d+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	// A cycle (never written by berth) still shows every session once.
	for i := range sessions {
		walk(i, 0)
	}
	return order, depth
}

// treeID is a session id indented to its depth in `berth ls`.
func treeID(id string, depth int) string {
	if depth == 0 {
		return id
	}
	return strings.Repeat("  ", depth-1) + "└ " + id
}
