package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-sh/berth"
)

// createFlags are the create body's fields as flags, shared by the
// commands that create a session.
type createFlags struct {
	req          berth.CreateRequest
	env, labels  []string
	ttl, idle    time.Duration
	workspaceRaw string
	mcpConfig    string
	wsOpts       workspaceFlags
	budget       budgetFlags
	networkAsk   bool
}

// add registers the flags on fl; agent is the --agent default.
func (c *createFlags) add(fl *pflag.FlagSet, agent string) {
	fl.StringVar(&c.req.Agent, "agent", agent, "agent from the catalog (berth agents)")
	fl.StringVar(&c.req.Name, "name", "", "a name for the session")
	fl.StringVar(&c.workspaceRaw, "workspace", "", "existing directory to work in (default: a managed workspace)")
	fl.StringVar(&c.req.Sandbox, "sandbox", "", "sandbox provider: auto, bwrap, docker or host (default: the daemon's)")
	fl.Var(&networkFlag{&c.req.Network}, "network", "the agent's network: --network (open), --network=false (none but the model gateway), or --network=HOST,... an allow list (api.github.com,*.npmjs.org:443)")
	fl.Lookup("network").NoOptDefVal = "true"
	fl.BoolVar(&c.networkAsk, "network-ask", false, "with an allow list: ask about a host it does not list instead of refusing it")
	addPermissionsFlag(fl, &c.req.PermissionMode, "permission mode: approve-reads (default), approve-all, deny-all or ask")
	fl.StringArrayVar(&c.env, "env", nil, "environment variable for the agent, KEY=VALUE (repeatable)")
	fl.StringArrayVar(&c.labels, "label", nil, "label, key=value (repeatable)")
	fl.DurationVar(&c.ttl, "ttl", 0, "stop the session this long after it starts (e.g. 2h; default: never)")
	fl.DurationVar(&c.idle, "idle-timeout", 0, "stop the session after this long without activity (default: the daemon's)")
	fl.StringVar(&c.req.FromSnapshot, "from-snapshot", "", "start the workspace from this snapshot, snap_… (berth snapshot ID --list lists a session's)")
	fl.StringVar(&c.req.Prompt, "prompt", "", "a first prompt, sent once the agent is ready")
	fl.StringVar(&c.mcpConfig, "mcp-config", "", "JSON file with the session's MCP servers: the API's mcp_servers list")
	c.wsOpts.add(fl)
	fl.IntVar(&c.req.MemoryMB, "memory-mb", 0, "memory limit of the sandbox in MiB, swap and /tmp included (default: the daemon's [sandbox] memory_mb)")
	c.budget.add(fl)
}

// request is the create body the flags give, or a usage error.
func (c *createFlags) request(cmd *cobra.Command) (berth.CreateRequest, error) {
	req := c.req
	var err error
	if c.workspaceRaw != "" {
		if req.Workspace, err = filepath.Abs(c.workspaceRaw); err != nil {
			return req, usagef(cmd, "bad --workspace: %v", err)
		}
	}
	if req.Env, err = keyValues(cmd, "--env", c.env); err != nil {
		return req, err
	}
	if req.Labels, err = keyValues(cmd, "--label", c.labels); err != nil {
		return req, err
	}
	if err := c.wsOpts.fill(cmd, &req); err != nil {
		return req, err
	}
	c.budget.fill(cmd.Flags(), &req.MaxCostUSD, &req.MaxTokens)
	if c.networkAsk {
		if req.Network.Mode != berth.NetworkAllowList {
			return req, usagef(cmd, "--network-ask goes with an allow list: --network HOST,...")
		}
		req.Network.Ask = true
	}
	if c.mcpConfig != "" {
		if req.MCPServers, err = readMCPConfig(c.mcpConfig); err != nil {
			return req, usagef(cmd, "bad --mcp-config: %v", err)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		to   *int
	}{{"--ttl", c.ttl, &req.TTLSeconds}, {"--idle-timeout", c.idle, &req.IdleTimeoutSeconds}} {
		if d.v < 0 || (d.v > 0 && d.v < time.Second) {
			return req, usagef(cmd, "%s must be at least 1s", d.flag)
		}
		*d.to = int(d.v / time.Second)
	}
	return req, nil
}

// keyValues parses repeated KEY=VALUE flags; nil when there are none.
func keyValues(cmd *cobra.Command, flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef(cmd, "%s wants KEY=VALUE, not %q", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}

// newCreateCommand returns `berth create`: a session, with every option of
// the create body, printed as `berth show` prints it (-q: its id alone).
func newCreateCommand() *cobra.Command {
	var (
		flags createFlags
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "create [--agent A] [--workspace DIR] [-q]",
		Short: "Create a session (the agent is started and ready when it returns)",
		Long: "Create a session: the daemon starts the agent and does its handshake before answering.\n" +
			"-q prints only the new session's id, for scripts: id=$(berth create -q --agent demo)",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := flags.request(cmd)
			if err != nil {
				return err
			}
			asJSON, c, err := dialFor(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			var raw json.RawMessage
			if err := c.Do(cmd.Context(), "POST", "/v1/sessions", nil, req, &raw); err != nil {
				return err
			}
			return printCreated(cmd.OutOrStdout(), raw, asJSON, quiet)
		},
	}
	flags.add(cmd.Flags(), "demo")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the session id")
	return cmd
}

// printCreated prints a created session: its id alone, the API's JSON, or
// the show table; a session whose agent did not start is an error after
// that (exit 1), with the agent's own words.
func printCreated(w io.Writer, raw json.RawMessage, asJSON, quiet bool) error {
	var s berth.Session
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	switch {
	case quiet:
		fmt.Fprintln(w, s.ID)
	case asJSON:
		if err := printRaw(w, raw); err != nil {
			return err
		}
	default:
		if err := writeSession(w, &s); err != nil {
			return err
		}
	}
	if s.State == berth.StateStopped {
		msg := string(s.StopReason)
		if s.Failure != nil {
			msg = s.Failure.Message
		}
		return fmt.Errorf("session %s did not start: %s", s.ID, msg)
	}
	return nil
}

// networkFlag is --network: true, false, or a comma-separated allow list.
type networkFlag struct{ p *berth.NetworkPolicy }

// String writes the flag's value as --network takes it.
func (f *networkFlag) String() string {
	switch f.p.Mode {
	case berth.NetworkOpen:
		return "true"
	case berth.NetworkAllowList:
		return strings.Join(f.p.Allow, ",")
	}
	return "false"
}

// Set reads true, false, or an allow list (each entry checked).
func (f *networkFlag) Set(v string) error {
	if b, err := strconv.ParseBool(v); err == nil {
		*f.p = berth.NetworkOf(b)
		return nil
	}
	p, err := berth.NetworkPolicy{Mode: berth.NetworkAllowList, Allow: strings.Split(v, ",")}.Normalize()
	if err != nil {
		return err
	}
	*f.p = p
	return nil
}

// Type names the flag's value in the help.
func (f *networkFlag) Type() string { return "bool|hosts" }
