package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/daemon"
	"github.com/berth-sh/berth/internal/pathx"
)

// newRunCmd creates a session, runs one prompt and streams it.
func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   `run [--agent demo] [--sandbox P] [--workspace DIR] [--permissions MODE] [--mcp-config FILE] [--rm] "prompt"`,
		Short: "Create a session, run one prompt and stream it to the terminal",
		Long: "Create a session, send the prompt and stream the agent's messages, thoughts and tool\n" +
			"calls as they come. Exits 0 when the turn ends with end_turn. When no daemon answers,\n" +
			"one is started in this process on the same home for the duration of the command.\n" +
			"The session stays (live on a running daemon, stopped with an in-process one) unless --rm.",
		Args: cobra.MinimumNArgs(1),
		RunE: runRun,
	}
	f := cmd.Flags()
	f.String("agent", "demo", "agent from the catalog (berth agents)")
	f.String("sandbox", "", "sandbox provider: auto, bwrap, docker or host (default: the daemon's)")
	f.String("workspace", "", "existing directory to work in (default: a managed workspace)")
	addPermissionsFlag(f, new(string), "permission mode: approve-reads (default: reads allowed, the rest answered here), approve-all, deny-all, or ask (answer each request here)")
	f.String("config", "", "config file for an in-process daemon (default $BERTH_HOME/config.toml)")
	f.String("mcp-config", "", "JSON file with the session's MCP servers: the API's mcp_servers list")
	f.Int("memory-mb", 0, "memory limit of the sandbox in MiB, swap and /tmp included (default: the daemon's [sandbox] memory_mb)")
	f.Bool("rm", false, "delete the session (its log and managed workspace) once the turn ends")
	new(budgetFlags).add(f)
	return cmd
}

// runRun is the run command.
func runRun(cmd *cobra.Command, args []string) error {
	text := strings.Join(args, " ")
	if strings.TrimSpace(text) == "" {
		return usagef(cmd, "the prompt is empty")
	}
	asJSON, err := jsonOutput(cmd)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	client, local, err := dialOrStart(cmd)
	if err != nil {
		return err
	}
	if local != nil {
		// The in-process daemon stops its session when the command ends,
		// within a bound even if another client stalls its shutdown.
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			defer cancel()
			local.Close(cctx)
		}()
	}
	defer client.Close()

	req := berth.CreateRequest{}
	f := cmd.Flags()
	req.Agent, _ = f.GetString("agent")
	req.Sandbox, _ = f.GetString("sandbox")
	req.PermissionMode, _ = f.GetString("permissions")
	req.MemoryMB, _ = f.GetInt("memory-mb")
	if f.Changed("max-cost-usd") {
		cost, _ := f.GetFloat64("max-cost-usd")
		req.MaxCostUSD = &cost
	}
	if f.Changed("max-tokens") {
		tokens, _ := f.GetInt64("max-tokens")
		req.MaxTokens = &tokens
	}
	if ws, _ := f.GetString("workspace"); ws != "" {
		if req.Workspace, err = filepath.Abs(ws); err != nil {
			return usagef(cmd, "bad --workspace: %v", err)
		}
	}
	if path, _ := f.GetString("mcp-config"); path != "" {
		if req.MCPServers, err = readMCPConfig(path); err != nil {
			return usagef(cmd, "bad --mcp-config: %v", err)
		}
	}
	s, err := client.CreateSession(ctx, req)
	if err != nil {
		return err
	}
	if s.Badge == berth.BadgeNeedsAuth {
		// The agent wants a login before its first conversation: say how.
		var ids []string
		for _, m := range acp.AuthMethodsOf(s.ACP.AuthMethods) {
			ids = append(ids, m.ID)
		}
		return &berth.Error{Code: berth.EConflict, Message: fmt.Sprintf(
			"session %s waits for the agent's authentication: berth authenticate %s METHOD (methods: %s), then berth prompt %s",
			s.ID, s.ID, strings.Join(ids, ", "), s.ID)}
	}
	if s.State != berth.StateActive {
		msg := string(s.StopReason)
		if s.Failure != nil {
			msg = s.Failure.Message
		}
		return fmt.Errorf("session %s did not start: %s", s.ID, msg)
	}
	res, err := client.Prompt(ctx, s.ID, berth.PromptRequest{Text: text})
	if err != nil {
		return err
	}
	// The agent's questions are put at the terminal; permissions in the
	// modes that ask (approve-all and deny-all answer them by policy).
	ask := newAsker(client, cmd.InOrStdin(), cmd.ErrOrStderr())
	ask.permissions = s.PermissionMode == berth.PermAsk || s.PermissionMode == berth.PermApproveReads
	end, err := streamTurn(ctx, client, s.ID, s.LastSeq, res.TurnID, cmd.OutOrStdout(), asJSON, ask)
	if rm, _ := f.GetBool("rm"); rm {
		// The turn is over (or was cancelled): nothing of the session is kept.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		derr := client.DeleteSession(dctx, s.ID)
		cancel()
		if derr != nil {
			return fmt.Errorf("session %s was not deleted: %w", s.ID, derr)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "session %s deleted (--rm)\n", s.ID)
	} else {
		fmt.Fprint(cmd.ErrOrStderr(), leftBehind(s.ID, local != nil, selfCommand()))
	}
	if err != nil {
		return err
	}
	return end.err()
}

// turnEnd is how a streamed turn ended: its stop reason and, for a turn
// that ended with an error, the error or the stopped session's failure.
type turnEnd struct {
	stop string
	code string
	msg  string
}

// err is nil for a turn that ended with end_turn, else the error
// `berth prompt --wait` reports for it (agent_exited: … code 3).
func (e turnEnd) err() error {
	switch {
	case e.stop == berth.TurnEndTurn:
		return nil
	case e.code != "" || e.msg != "":
		return turnFailed(e.code, e.msg)
	}
	return fmt.Errorf("the turn ended with %s", e.stop)
}

// turnFailed is the error of a turn that ended with the error code: msg,
// as run and prompt --wait report it.
func turnFailed(code, msg string) error {
	return fmt.Errorf("the turn ended with an error: %s: %s", orDash(code), msg)
}

// readMCPConfig reads a JSON list of MCP servers, strictly: the daemon
// checks the rest.
func readMCPConfig(path string) ([]berth.MCPServer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var servers []berth.MCPServer
	if err := dec.Decode(&servers); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return servers, nil
}

// leftBehind says what the command left of the session and how to reach
// it, naming berth as self (selfCommand): on a running daemon the session
// stays live; with a daemon of this command's own it was stopped with it,
// its log and workspace kept.
func leftBehind(id string, inProcess bool, self string) string {
	if inProcess {
		return fmt.Sprintf("session %s stopped with this command's daemon; its log and workspace stay.\n"+
			"To go on with it: %s serve (in another terminal), then %s resume %s\n", id, self, self, id)
	}
	return fmt.Sprintf("session %s stays live on the daemon: %s prompt %s \"…\", %s logs %s, %s stop %s or %s rm %s\n",
		id, self, id, self, id, self, id, self, id)
}

// goRunCommand is how a user who ran berth by `go run` (README.md, Set
// up) runs it again: that binary is not on their PATH.
const goRunCommand = "go run ./cmd/berth"

// selfCommand is how the user runs this berth again: goRunCommand when
// this binary is one go run built, else "berth".
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil || !isGoRunBinary(exe, os.Getenv("GOCACHE")) {
		return "berth"
	}
	return goRunCommand
}

// isGoRunBinary reports whether exe is where go run puts what it builds:
// the build cache (gocache, else a directory named go-build, its default
// name) or a go-build temporary directory.
func isGoRunBinary(exe, gocache string) bool {
	if gocache != "" && pathx.Within(gocache, exe) {
		return true
	}
	for _, part := range strings.Split(filepath.Dir(exe), string(filepath.Separator)) {
		if strings.HasPrefix(part, "go-build") {
			return true
		}
	}
	return false
}

// streamTurn prints a session's events from after on until turnID ends and
// returns how it ended. When ctx ends first (Ctrl-C) it cancels the turn
// and keeps printing until the turn closes.
func streamTurn(ctx context.Context, c *bclient.Client, id string, after int64, turnID string, w io.Writer, asJSON bool, ask *asker) (turnEnd, error) {
	r := newEventRenderer(w)
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopCancel := context.AfterFunc(ctx, func() {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer ccancel()
		if _, err := c.Cancel(cctx, id); err != nil && !berth.IsCode(err, berth.EConflict) {
			fmt.Fprintf(os.Stderr, "berth: cancel: %s\n", errorText(err))
		}
	})
	defer stopCancel()
	for raw, err := range c.EventsRaw(streamCtx, id, after) {
		if err != nil {
			return turnEnd{}, err
		}
		var ev berth.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return turnEnd{}, fmt.Errorf("the daemon sent an event that does not decode: %w", err)
		}
		ours := ev.Type == berth.EventTurnEnded && ev.TurnID == turnID
		switch {
		case asJSON:
			// The API's JSON unchanged, one event a line.
			if err := printRaw(w, raw); err != nil {
				return turnEnd{}, err
			}
		case !ours:
			// The end of the turn is told by the exit code, not on stdout.
			r.render(ev)
		}
		if ask != nil && ev.Type == berth.EventElicitationRequested {
			if e, ok := elicitationOfEvent(ev); ok {
				r.endLine()
				if err := ask.askElicitation(ctx, id, e); err != nil {
					return turnEnd{}, err
				}
			}
		}
		if ask != nil && ask.permissions && ev.Type == berth.EventPermissionRequested {
			var d struct {
				Permission berth.Permission `json:"permission"`
			}
			if err := json.Unmarshal(ev.Data, &d); err == nil {
				r.endLine()
				if err := ask.ask(ctx, id, &d.Permission); err != nil {
					return turnEnd{}, err
				}
			}
		}
		switch {
		case ours:
			r.endLine()
			d := decodeData(ev)
			return turnEnd{stop: d.str("stop_reason"), code: d.str("error", "code"), msg: d.str("error", "message")}, nil
		case ev.Type == berth.EventSessionStopped:
			r.endLine()
			d := decodeData(ev)
			return turnEnd{stop: berth.TurnError, code: d.str("failure", "kind"), msg: d.str("failure", "message")}, nil
		}
	}
	return turnEnd{}, errors.New("the event stream ended before the turn")
}

// dialOrStart returns a client of the running daemon — at --addr, or on
// the home's socket — or, when none answers and no --addr was given, of a
// daemon started in this process on the same home (Unix socket only). A
// home without its socket has no daemon running: whatever answers at the
// default TCP address then is another home's, and is not asked.
func dialOrStart(cmd *cobra.Command) (*bclient.Client, *daemon.Daemon, error) {
	home, err := homeDir(cmd)
	if err != nil {
		return nil, nil, err
	}
	ctx := cmd.Context()
	explicit := flagOrEnv(cmd, "addr", "BERTH_ADDR") != ""
	if explicit || isSocket(homeSocket(home, homeConfig(cmd))) {
		client, err := dial(cmd)
		if err != nil {
			return nil, nil, err
		}
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = client.Health(hctx)
		cancel()
		if err == nil || !isUnavailable(err) || explicit {
			return client, nil, err
		}
		client.Close()
	}
	cfgPath, _ := cmd.Flags().GetString("config")
	cfg, err := loadConfig(home, cfgPath)
	if err != nil {
		return nil, nil, err
	}
	socket := homeSocket(home, cfg)
	d, err := daemon.Open(ctx, daemonOptions(daemon.Options{Home: home, Config: cfg, Socket: socket,
		Logger: quietLogger().With("daemon", "in-process"), NoShims: true, LeaveSessions: true}))
	if err != nil {
		return nil, nil, err
	}
	d.Start()
	c, err := d.Client(bclient.WithToken(cfg.Server.Token))
	if err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		d.Close(cctx)
		return nil, nil, err
	}
	return c, d, nil
}
