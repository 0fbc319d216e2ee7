package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	bclient "github.com/berth-sh/berth/client"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/daemon"
)

// Options are what the berth binary gives its bench command.
type Options struct {
	// Daemon completes the options of each daemon the bench opens in this
	// process (its version, its small shim).
	Daemon func(daemon.Options) daemon.Options
	// Usagef makes the error of bad arguments (the CLI exits 2 with it).
	Usagef func(cmd *cobra.Command, format string, args ...any) error
	// JSONOutput reports whether -o json was asked (an error for a bad -o).
	JSONOutput func(cmd *cobra.Command) (bool, error)
}

// NewCommand returns `berth bench`, which measures a daemon with the demo
// agent.
func NewCommand(o Options) *cobra.Command {
	b := &bench{Options: o}
	cmd := &cobra.Command{
		Use:   "bench [--sessions N] [--prompts M] [--sandbox P] [--flood N] [-o json]",
		Short: "Measure session, prompt and ingest latency with the demo agent",
		Long: "Start a daemon in this process on a temporary home, create N demo sessions, send M\n" +
			"prompts to each, run one flood turn, and report create→active latency, prompt→first\n" +
			"SSE event latency and durable ingest in events per second. Each create and prompt is\n" +
			"followed by the same with the agent started and prompted directly (no berth), and\n" +
			"each prompt by one to a daemon without shims, so the report gives ratios measured in\n" +
			"the same run. -o json prints the figures as one JSON object on the last line.",
		Args: cobra.NoArgs,
		RunE: b.run,
	}
	f := cmd.Flags()
	f.Int("sessions", 20, "sessions to create")
	f.Int("prompts", 10, "prompts per session")
	f.String("sandbox", "host", "sandbox provider of the sessions")
	f.String("agent-command", "", "time the creates with this agent (a command and its arguments, split on spaces; with --prompts 0), beside it started directly, instead of the demo agent")
	f.Int("flood", 200000, "events in the flood turn (0 skips it)")
	f.Int("flood-size", 64, "bytes per flood event")
	f.String("store", "", "store URL (default: SQLite in the temporary home)")
	f.String("cpuprofile", "", "write a CPU profile of the flood turn (or of the --gateway bench, or of the --prompts-at-once rounds) to this file")
	f.Int64("page-log", 1_000_000, "events in the log paged from its end (0 skips it)")
	f.Int("list-sessions", 10_000, "stored sessions listed one page at a time (0 skips it)")
	f.Int("reattach", 0, "live sessions a booting daemon reattaches, timed (0 skips it); implies --live of as many")
	f.Int("live", 0, "idle demo sessions a daemon holds while its memory is read (0 skips it)")
	f.String("boot-profile", "", "the reattaching daemon writes PREFIX.cpu (its boot) and PREFIX.heap (once every session is reattached)")
	f.String("daemon-binary", "", "berth binary the --live and --reattach daemons run (default: this one)")
	f.String("reattach-against", "", "after the --reattach boot, boot this berth binary and --daemon-binary's again over the same sessions, alternating")
	f.Int("reattach-rounds", 3, "boots of each binary --reattach-against asks for")
	f.Duration("reattach-gone", 0, "after the --reattach boots, end the daemon and time the shims' CPU over this long with none (0 skips it)")
	f.Int("scrape", 0, "time GET /metrics of a daemon with this many sessions: the bench's, and stopped ones stored to make up the number (0 skips it)")
	f.Int("fanout", 0, "readers of /v1/events/stream while every session runs turns (0 skips it)")
	f.Duration("fanout-seconds", 10*time.Second, "how long the sessions run turns during --fanout")
	f.Bool("no-shims", false, "run the agents as the daemon's own children (no shim), for comparison")
	f.Int("children", 0, "children of one parent spawned, timed until active; then --prompts prompts to a child through the parent's berth MCP server and over the API (0 skips it)")
	f.Int("soak", 0, "run only a soak of this many create → prompt → delete cycles, and fail if the daemon holds more fds, goroutines, processes or disk afterwards")
	f.Int("soak-in-flight", 20, "soak cycles run at once")
	f.Int("checkpoint-files", 0, "run only a checkpoint bench: a workspace of this many files, checkpointed after one changed")
	f.Int("checkpoint-rounds", 50, "changed-file checkpoints timed by --checkpoint-files")
	f.Int("workspace-files", 0, "files written into the workspace of each session prompted, which its checkpoints take")
	f.Duration("prompt-gap", 0, "pause before each prompt a session is sent, as a user reading the answer (the next checkpoint is taken meanwhile)")
	f.Int("prompts-at-once", 0, "run only: this many prompts sent at once to as many of --sessions live sessions, --prompts rounds, with checkpoints on beside a daemon with them off (0 skips it)")
	f.Int("cluster", 0, "run only a cluster bench: this many \"berth serve\" nodes on loopback ports sharing the PostgreSQL database --store names (its own), timed: --sessions creates across them, --prompts cross-node prompts, a SIGKILL failover")
	f.Duration("cluster-ttl", 2*time.Second, "[cluster] lease_ttl of the --cluster nodes")
	f.String("storage", "", "[cluster] the --cluster nodes keep their sessions' state in this object store (s3://BUCKET/PREFIX?endpoint=…, keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY): also timed, turns with it on and off, an upload, a restore and the failover until the lost node's sessions are active elsewhere")
	f.Int("storage-files", 10_000, "[storage] small files (1 B–8 KiB) of the workspace synced, restored and moved")
	f.Int("storage-upload-mib", 256, "[storage] MiB of incompressible 8 MiB files whose upload is timed")
	f.Int64("hostile-flood", 0, "run only a hostile flood: one turn of the demo agent writing this many bytes, in a \"berth serve\" of its own, timed and weighed (daemon memory, store, spool, answers) beside the agent run directly (0 skips it)")
	f.Int("hostile-chunk", 20_000_000, "bytes per chunk of --hostile-flood")
	f.Int("footprint", 0, "run only a memory bench: this many idle demo sessions against as many demo agents started directly, every process's PSS and RSS (0 skips it); --daemon-binary picks the berth")
	f.Int("footprint-rounds", 3, "[footprint] rounds, each the direct agents then the sessions")
	f.Int("startup", 0, "run only a start-up bench: this many starts each of \"berth --help\", \"berth --version\", a Go hello world (built with the go on PATH) and \"berth serve\" on an empty home to its first answer, interleaved (0 skips it); --daemon-binary picks the berth")
	f.Int("gateway", 0, "run only a model gateway bench: this many JSON and as many streaming calls to the model stand-in, one at a time, each straight and through the gateway (0 skips it)")
	f.Int("gateway-streams", 200, "[gateway] streaming calls at once, each with a session key of its own (0 skips them)")
	f.Int("gateway-rounds", 4, "[gateway] rounds of --gateway-streams clients making 5 streaming calls each, each way")
	f.Int("gateway-body", 32<<10, "[gateway] bytes of each request's body")
	f.Duration("gateway-gap", 100*time.Millisecond, "[gateway] the stand-in's pause after each event it streams to --gateway-streams")
	f.Int("idle", 0, "run only an idle bench: this many demo sessions in a \"berth serve\" of its own and as many demo agents started directly, left idle; the CPU each uses over --idle-seconds (0 skips it)")
	f.Duration("idle-seconds", time.Minute, "[idle] how long the idle sessions are measured")
	return cmd
}

// Result is what bench reports: with -o json, the last line of its output.
type Result struct {
	Machine         string  `json:"machine"`
	Store           string  `json:"store"`
	Sandbox         string  `json:"sandbox"`
	Agent           string  `json:"agent"`
	Sessions        int     `json:"sessions"`
	Prompts         int     `json:"prompts"`
	CreateP50Ms     float64 `json:"create_p50_ms"`
	CreateP99Ms     float64 `json:"create_p99_ms"`
	FirstEventP50Ms float64 `json:"prompt_first_event_p50_ms"`
	FirstEventP99Ms float64 `json:"prompt_first_event_p99_ms"`
	FloodEvents     int64   `json:"flood_events"`
	FloodSeconds    float64 `json:"flood_seconds"`
	IngestPerSec    float64 `json:"ingest_events_per_sec"`
	readResult
	shimResult
	bootResult
	fanoutResult
	directResult
	childrenResult
	scrapeResult
	promptFloorResult
}

// bench is the bench command with its options.
type bench struct{ Options }

// openDaemon opens a daemon on a temporary home that listens on a loopback
// port, and starts serving.
func (b *bench) openDaemon(ctx context.Context, o daemon.Options) (*daemon.Daemon, error) {
	o.Addr = "127.0.0.1:0"
	if b.Daemon != nil {
		o = b.Daemon(o)
	}
	d, err := daemon.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	d.Start()
	return d, nil
}

// quietLogger logs warnings and errors only: the bench's own output is
// what the user reads.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// benchFlags are the flags every kind of bench reads.
type benchFlags struct {
	sessions, prompts int
	sandbox           string
	flood, floodSize  int
	storeURL          string
	// files are written into each prompted session's workspace; gap is
	// the pause before each prompt.
	files int
	gap   time.Duration
	// agent is the catalog name of the agent the creates time: demo, or
	// the one --agent-command adds.
	agent string
}

// benchAgentName is the catalog name of the agent --agent-command gives.
const benchAgentName = "bench-agent"

// run is the bench command: a bench that runs alone (--checkpoint-files,
// --hostile-flood, --cluster, --gateway), or the benches of a daemon in this process.
func (b *bench) run(cmd *cobra.Command, _ []string) error {
	asJSON, err := b.JSONOutput(cmd)
	if err != nil {
		return err
	}
	f := cmd.Flags()
	var fl benchFlags
	fl.sessions, _ = f.GetInt("sessions")
	fl.prompts, _ = f.GetInt("prompts")
	fl.sandbox, _ = f.GetString("sandbox")
	fl.flood, _ = f.GetInt("flood")
	fl.floodSize, _ = f.GetInt("flood-size")
	fl.storeURL, _ = f.GetString("store")
	fl.files, _ = f.GetInt("workspace-files")
	fl.gap, _ = f.GetDuration("prompt-gap")
	fl.agent = "demo"
	if line, _ := f.GetString("agent-command"); line != "" {
		if strings.TrimSpace(line) == "" || fl.prompts > 0 {
			// The prompts' echo and their baseline are the demo agent's.
			return b.Usagef(cmd, "--agent-command times creates only: give it a command and --prompts 0")
		}
		fl.agent = benchAgentName
	}
	if fl.sessions < 1 || fl.prompts < 0 || fl.flood < 0 || fl.floodSize < 1 || fl.files < 0 || fl.gap < 0 {
		return b.Usagef(cmd, "--sessions must be ≥ 1, --prompts, --flood, --workspace-files, --prompt-gap ≥ 0, --flood-size ≥ 1")
	}
	if alone, err := b.runAlone(cmd, fl, asJSON); alone {
		return err
	}
	return b.runInProcess(cmd, fl, asJSON)
}

// runAlone runs the bench asked for that needs no daemon in this process:
// a checkpoint bench, a hostile flood, an idle bench, a cluster or the
// model gateway's bench (which opens a daemon of its own). alone is false when none was
// asked for.
func (b *bench) runAlone(cmd *cobra.Command, fl benchFlags, asJSON bool) (alone bool, _ error) {
	f, usagef := cmd.Flags(), b.Usagef
	out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if n, _ := f.GetInt("checkpoint-files"); n > 0 {
		rounds, _ := f.GetInt("checkpoint-rounds")
		if rounds < 1 {
			return true, usagef(cmd, "--checkpoint-rounds must be at least 1")
		}
		return true, runCheckpointBench(cmd.Context(), n, rounds, asJSON, out, progress)
	}
	if total, _ := f.GetInt64("hostile-flood"); total > 0 {
		chunk, _ := f.GetInt("hostile-chunk")
		bin, _ := f.GetString("daemon-binary")
		if chunk < 1 || int64(chunk) > total {
			return true, usagef(cmd, "--hostile-chunk must be between 1 and --hostile-flood")
		}
		return true, runHostileBench(cmd.Context(), benchBootOptions{binary: bin, sandbox: fl.sandbox}, total, chunk, asJSON,
			out, progress)
	}
	if n, _ := f.GetInt("footprint"); n > 0 {
		rounds, _ := f.GetInt("footprint-rounds")
		bin, _ := f.GetString("daemon-binary")
		if rounds < 1 {
			return true, usagef(cmd, "--footprint-rounds must be at least 1")
		}
		return true, runFootprintBench(cmd.Context(), benchBootOptions{binary: bin, sandbox: fl.sandbox}, n, rounds, asJSON, out, progress)
	}
	if n, _ := f.GetInt("startup"); n > 0 {
		bin, _ := f.GetString("daemon-binary")
		return true, runStartupBench(cmd.Context(), benchBootOptions{binary: bin}, n, asJSON, out, progress)
	}
	if n, _ := f.GetInt("gateway"); n > 0 {
		g := gatewayFlags{calls: n, storeURL: fl.storeURL}
		g.cpuProfile, _ = f.GetString("cpuprofile")
		g.streams, _ = f.GetInt("gateway-streams")
		g.rounds, _ = f.GetInt("gateway-rounds")
		g.body, _ = f.GetInt("gateway-body")
		g.gap, _ = f.GetDuration("gateway-gap")
		if g.streams < 0 || g.streams > gwMaxConns || g.rounds < 0 || g.body < 0 || g.gap < 0 {
			return true, usagef(cmd, "--gateway-streams must be between 0 and %d, --gateway-rounds, --gateway-body and --gateway-gap ≥ 0", gwMaxConns)
		}
		return true, b.runGatewayBench(cmd.Context(), g, asJSON, out, progress)
	}
	if k, _ := f.GetInt("prompts-at-once"); k > 0 {
		if k > fl.sessions || fl.prompts < 1 {
			return true, usagef(cmd, "--prompts-at-once must be at most --sessions, with --prompts ≥ 1 rounds")
		}
		profile, _ := f.GetString("cpuprofile")
		return true, b.runAtOnce(cmd.Context(), fl, k, profile, asJSON, out, progress)
	}
	if n, _ := f.GetInt("idle"); n > 0 {
		window, _ := f.GetDuration("idle-seconds")
		bin, _ := f.GetString("daemon-binary")
		if window < time.Second {
			return true, usagef(cmd, "--idle-seconds must be at least 1s")
		}
		return true, runIdleBench(cmd.Context(), benchBootOptions{binary: bin, sandbox: fl.sandbox}, n, window, asJSON, out, progress)
	}
	if n, _ := f.GetInt("cluster"); n > 0 {
		ttl, _ := f.GetDuration("cluster-ttl")
		bin, _ := f.GetString("daemon-binary")
		if n < 2 || ttl < time.Second || !strings.HasPrefix(fl.storeURL, "postgres") {
			return true, usagef(cmd, "--cluster needs at least 2 nodes, --cluster-ttl ≥ 1s and --store postgres://… (a database of its own)")
		}
		so := storageOptions{}
		so.url, _ = f.GetString("storage")
		so.files, _ = f.GetInt("storage-files")
		so.bulkMiB, _ = f.GetInt("storage-upload-mib")
		if so.url != "" && (!strings.HasPrefix(so.url, "s3://") || so.files < 1 || so.bulkMiB < 8) {
			return true, usagef(cmd, "--storage must be s3://BUCKET/PREFIX?endpoint=http://HOST:PORT&region=R, with --storage-files ≥ 1 and --storage-upload-mib ≥ 8")
		}
		return true, benchCluster(cmd.Context(), benchBootOptions{binary: bin, storeURL: fl.storeURL, sandbox: fl.sandbox},
			n, fl.sessions, max(fl.prompts, 1), ttl, so, asJSON, out, progress)
	}
	return false, nil
}

// tempHome makes a temporary daemon home named from prefix, and its
// default configuration with the store at storeURL ("" for the home's
// own). The caller removes the home when done.
func tempHome(prefix, storeURL string) (string, *config.Config, error) {
	home, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	cfg, err := config.LoadDefault(home, os.Environ())
	if err != nil {
		os.RemoveAll(home)
		return "", nil, err
	}
	cfg.Store.URL = storeURL
	return home, cfg, nil
}

// runInProcess opens a daemon in this process on a temporary home and
// runs a soak on it, or measures it: creates, prompts, a flood, then the
// benches the flags ask for.
func (b *bench) runInProcess(cmd *cobra.Command, fl benchFlags, asJSON bool) error {
	f := cmd.Flags()
	home, cfg, err := tempHome("berth-bench-", fl.storeURL)
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	nChildren, _ := f.GetInt("children")
	cfg.Limits.MaxSessions = max(cfg.Limits.MaxSessions, fl.sessions+nChildren+2)
	cfg.Limits.MaxChildren = max(cfg.Limits.MaxChildren, nChildren)
	if line, _ := f.GetString("agent-command"); line != "" {
		argv := strings.Fields(line)
		cfg.Agents = append(cfg.Agents, berth.AgentSpec{Name: benchAgentName, Command: argv[0], Args: argv[1:],
			Description: "the agent of bench --agent-command"})
	}
	ctx := cmd.Context()
	noShims, _ := f.GetBool("no-shims")
	d, err := b.openDaemon(ctx, daemon.Options{Home: home, Config: cfg,
		Logger: quietLogger().With("daemon", "bench"), NoShims: noShims})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), daemon.ShutdownTimeout)
		defer cancel()
		d.Close(cctx)
	}()
	c, err := d.Client()
	if err != nil {
		return err
	}
	defer c.Close()

	if n, _ := f.GetInt("soak"); n > 0 {
		return b.soak(cmd, c, d, fl.sandbox, n)
	}

	res := Result{Machine: machine(), Store: d.Store().Name(), Sandbox: fl.sandbox, Agent: fl.agent, Sessions: fl.sessions, Prompts: fl.prompts}
	res.WorkspaceFiles, res.PromptGapMs = fl.files, ms(fl.gap)
	progress := cmd.ErrOrStderr()
	direct := &directAgents{}
	defer direct.close()
	ids, err := benchCreates(ctx, c, cfg, fl, direct, &res, progress)
	if err != nil {
		return err
	}
	if fl.prompts > 0 {
		if err := b.benchAllPrompts(ctx, c, cfg, fl, ids, direct.agents, noShims, &res, progress); err != nil {
			return err
		}
	}
	if fl.flood > 0 {
		fmt.Fprintf(progress, "flooding %d events of %d bytes…\n", fl.flood, fl.floodSize)
		if path, _ := f.GetString("cpuprofile"); path != "" {
			stop, err := StartCPUProfile(path)
			if err != nil {
				return err
			}
			defer stop()
		}
		if err := benchFlood(ctx, c, d, fl.flood, fl.floodSize, &res); err != nil {
			return err
		}
	}
	if err := b.benchAsked(cmd, c, d, fl, ids, &res); err != nil {
		return err
	}
	res.LoadAverage = loadAverage()
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
	}
	printBench(cmd.OutOrStdout(), res)
	return nil
}

// soak runs n create → prompt → delete cycles on the daemon d and reports
// what it held before and after.
func (b *bench) soak(cmd *cobra.Command, c *bclient.Client, d *daemon.Daemon, sandbox string, n int) error {
	inFlight, _ := cmd.Flags().GetInt("soak-in-flight")
	if inFlight < 1 {
		return b.Usagef(cmd, "--soak-in-flight must be at least 1")
	}
	before, after, err := runSoak(cmd.Context(), c, d, sandbox, n, inFlight, cmd.ErrOrStderr())
	fmt.Fprintf(cmd.OutOrStdout(), "soak: before %+v\nsoak: after  %+v\n", before, after)
	return err
}

// directAgents are the agents benchCreates started directly, in
// temporary directories under root.
type directAgents struct {
	root   string
	agents []*directAgent
}

// close stops the agents and removes their directories.
func (a *directAgents) close() {
	for _, d := range a.agents {
		d.close()
	}
	if a.root != "" {
		_ = os.RemoveAll(a.root)
	}
}

// benchCreates creates the sessions and records create → active (the API
// answers only once the handshake is done). Each create is followed by
// the baseline, the same agent started and handshaken with no berth, so
// both see the same machine; those agents are left in direct for the
// prompts.
func benchCreates(ctx context.Context, c *bclient.Client, cfg *config.Config, fl benchFlags, direct *directAgents,
	res *Result, progress io.Writer) ([]string, error) {
	spec, err := directCatalogAgent(cfg, fl.agent)
	if err != nil {
		return nil, err
	}
	if direct.root, err = os.MkdirTemp("", "berth-bench-direct-"); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "creating %d sessions, each beside the agent started directly…\n", fl.sessions)
	var creates, directStarts []time.Duration
	var ids []string
	for range fl.sessions {
		t0 := time.Now()
		s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: fl.agent, Sandbox: fl.sandbox})
		if err != nil {
			return nil, err
		}
		if s.State != berth.StateActive {
			return nil, fmt.Errorf("bench session %s did not start: %v", s.ID, s.Failure)
		}
		creates = append(creates, time.Since(t0))
		ids = append(ids, s.ID)
		a, took, err := startDirect(spec, direct.root, fl.sandbox)
		if err != nil {
			return nil, err
		}
		direct.agents, directStarts = append(direct.agents, a), append(directStarts, took)
	}
	res.CreateP50Ms, res.CreateP99Ms = pct(creates, 50), pct(creates, 99)
	res.CreateDirectP50Ms, res.CreateDirectP99Ms = pct(directStarts, 50), pct(directStarts, 99)
	res.CreateRatio = ratio(res.CreateP50Ms, res.CreateDirectP50Ms)
	return ids, nil
}

// benchAsked runs the benches past the flood that the flags ask for, in
// this order: the event fan-out, a /metrics scrape, paging a long log,
// listing many sessions, children, then a daemon's boot.
func (b *bench) benchAsked(cmd *cobra.Command, c *bclient.Client, d *daemon.Daemon, fl benchFlags, ids []string, res *Result) error {
	f, ctx, progress := cmd.Flags(), cmd.Context(), cmd.ErrOrStderr()
	if n, _ := f.GetInt("fanout"); n > 0 {
		dur, _ := f.GetDuration("fanout-seconds")
		if err := benchFanout(ctx, c, d, fl.sandbox, ids, n, dur, &res.fanoutResult, progress); err != nil {
			return err
		}
	}
	if n, _ := f.GetInt("scrape"); n > 0 {
		fmt.Fprintf(progress, "scraping /metrics of a daemon with %d sessions…\n", max(n, fl.sessions))
		if err := benchScrape(ctx, d, fl.sessions, n, &res.scrapeResult); err != nil {
			return err
		}
	}
	if err := b.benchReads(cmd, c, d, res); err != nil {
		return err
	}
	if n, _ := f.GetInt("children"); n > 0 {
		if err := benchChildren(ctx, c, fl.sandbox, n, fl.prompts, &res.childrenResult, progress); err != nil {
			return err
		}
	}
	nLive, _ := f.GetInt("live")
	nReattach, _ := f.GetInt("reattach")
	if n := max(nLive, nReattach); n > 0 {
		o := benchBootOptions{storeURL: fl.storeURL, sandbox: fl.sandbox}
		o.binary, _ = f.GetString("daemon-binary")
		o.profile, _ = f.GetString("boot-profile")
		o.against, _ = f.GetString("reattach-against")
		o.rounds, _ = f.GetInt("reattach-rounds")
		o.gone, _ = f.GetDuration("reattach-gone")
		if err := benchBoot(ctx, o, n, nReattach > 0, res, progress); err != nil {
			return err
		}
	}
	return nil
}

// benchReads pages the end of a long log and lists many sessions, as the
// flags ask.
func (b *bench) benchReads(cmd *cobra.Command, c *bclient.Client, d *daemon.Daemon, res *Result) error {
	f, ctx, progress := cmd.Flags(), cmd.Context(), cmd.ErrOrStderr()
	if n, _ := f.GetInt64("page-log"); n > 0 {
		if n < 1000 {
			return b.Usagef(cmd, "--page-log must be 0 or at least 1000")
		}
		fmt.Fprintf(progress, "paging the end of a %d-event log…\n", n)
		if err := benchPaging(ctx, c, d, n, &res.readResult); err != nil {
			return err
		}
	}
	if n, _ := f.GetInt("list-sessions"); n > 0 {
		fmt.Fprintf(progress, "listing %d sessions…\n", n)
		if err := benchListing(ctx, c, d, n, 100, &res.readResult); err != nil {
			return err
		}
	}
	return nil
}

// benchAllPrompts sends prompts to every session, and as many to the
// same agents started directly, and, when the daemon runs shims, to a
// second daemon's sessions whose agents are its own children: one prompt
// of each in turn, so the three see the same machine. It records prompt →
// first SSE event and prompt → first agent event of each.
func (b *bench) benchAllPrompts(ctx context.Context, c *bclient.Client, cfg *config.Config, fl benchFlags, ids []string,
	direct []*directAgent, noShims bool, res *Result, progress io.Writer) error {
	sandbox, n := fl.sandbox, fl.prompts
	var plain *bclient.Client
	if !noShims {
		home, err := os.MkdirTemp("", "berth-bench-noshim-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(home)
		d, err := b.openDaemon(ctx, daemon.Options{Home: home, Config: cfg,
			Logger: quietLogger().With("daemon", "bench-noshim"), NoShims: true})
		if err != nil {
			return err
		}
		defer closeBenchDaemon(ctx, d)
		if plain, err = d.Client(); err != nil {
			return err
		}
		defer plain.Close()
	}
	fmt.Fprintf(progress, "sending %d prompts to each session, beside the agents without shims and without berth…\n", n)
	var firsts, agents, plainAgents, directAgents []time.Duration
	for i, id := range ids {
		if fl.files > 0 {
			s, err := c.GetSession(ctx, id)
			if err == nil {
				err = fillWorkspace(s.Workspace, fl.files)
			}
			if err != nil {
				return err
			}
		}
		p, err := openPromptProbe(ctx, c, id)
		if err != nil {
			return err
		}
		var q *promptProbe
		if plain != nil {
			s, err := plain.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: sandbox})
			if err == nil {
				q, err = openPromptProbe(ctx, plain, s.ID)
			}
			if err != nil {
				p.close()
				return err
			}
		}
		for range n {
			time.Sleep(fl.gap)
			first, agent, err := p.prompt(ctx)
			if err == nil && q != nil {
				var a time.Duration
				if _, a, err = q.prompt(ctx); err == nil {
					plainAgents = append(plainAgents, a)
				}
			}
			var d time.Duration
			if err == nil {
				d, err = direct[i].prompt("echo bench")
			}
			if err != nil {
				p.close()
				if q != nil {
					q.close()
				}
				return err
			}
			firsts, agents, directAgents = append(firsts, first), append(agents, agent), append(directAgents, d)
		}
		p.close()
		if q != nil {
			q.close()
		}
	}
	res.FirstEventP50Ms, res.FirstEventP99Ms = pct(firsts, 50), pct(firsts, 99)
	res.AgentEventP50Ms, res.AgentEventP99Ms = pct(agents, 50), pct(agents, 99)
	res.AgentEventNoShimP50Ms, res.AgentEventNoShimP99Ms = pct(plainAgents, 50), pct(plainAgents, 99)
	res.AgentEventDirectP50Ms, res.AgentEventDirectP99Ms = pct(directAgents, 50), pct(directAgents, 99)
	res.AgentEventShimRatio = ratio(res.AgentEventP50Ms, res.AgentEventNoShimP50Ms)
	res.AgentEventDirectRatio = ratio(res.AgentEventP50Ms, res.AgentEventDirectP50Ms)
	res.AgentEventAddedP50Ms = res.AgentEventP50Ms - res.AgentEventDirectP50Ms
	return nil
}

// promptProbe times prompts on one session over an SSE stream opened
// beforehand.
type promptProbe struct {
	c      *bclient.Client
	id     string
	events chan berth.Event
	done   chan error
	cancel context.CancelFunc
}

// openPromptProbe opens the session's stream and runs one unmeasured turn,
// which makes sure the stream is connected.
func openPromptProbe(ctx context.Context, c *bclient.Client, id string) (*promptProbe, error) {
	s, err := c.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	p := &promptProbe{c: c, id: id, events: make(chan berth.Event, 1024), done: make(chan error, 1), cancel: cancel}
	go func() {
		defer close(p.events)
		for ev, err := range c.Events(sctx, id, s.LastSeq) {
			if err != nil {
				p.done <- err
				return
			}
			p.events <- ev
		}
		p.done <- nil
	}()
	if _, _, err := p.prompt(ctx); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// prompt sends one echo prompt and returns the time from sending it to its
// first SSE event, and to the first event the agent's answer made.
func (p *promptProbe) prompt(ctx context.Context) (first, agent time.Duration, _ error) {
	t0 := time.Now()
	r, err := p.c.Prompt(ctx, p.id, berth.PromptRequest{Text: "echo bench"})
	if err != nil {
		return 0, 0, err
	}
	for ev := range p.events {
		if ev.TurnID != r.TurnID {
			continue
		}
		if first == 0 {
			first = time.Since(t0)
		}
		if agent == 0 && ev.Type == berth.EventAgentMessage {
			agent = time.Since(t0)
		}
		if ev.Type == berth.EventTurnEnded {
			break
		}
	}
	if first == 0 || agent == 0 {
		return 0, 0, fmt.Errorf("stream of %s ended: %v", p.id, <-p.done)
	}
	return first, agent, nil
}

// close ends the stream and waits for its reader.
func (p *promptProbe) close() {
	p.cancel()
	for range p.events {
	}
}

// benchFlood runs one flood turn and measures durable ingest: from the
// prompt to the moment every event of the turn is committed.
func benchFlood(ctx context.Context, c *bclient.Client, d *daemon.Daemon, n, size int, res *Result) error {
	s, err := c.CreateSession(ctx, berth.CreateRequest{Agent: "demo", Sandbox: res.Sandbox})
	if err != nil {
		return err
	}
	before := s.LastSeq
	t0 := time.Now()
	if _, err := c.Prompt(ctx, s.ID, berth.PromptRequest{Text: fmt.Sprintf("flood %d %d", n, size)}); err != nil {
		return err
	}
	// Poll rather than ?wait=true: the turn's text is megabytes long.
	for {
		cur, err := c.GetSession(ctx, s.ID)
		if err != nil {
			return err
		}
		if cur.CurrentTurnID == "" {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := d.Log().Flush(ctx); err != nil {
		return err
	}
	elapsed := time.Since(t0)
	after, err := d.Store().LastSeq(ctx, s.ID)
	if err != nil {
		return err
	}
	res.FloodEvents = after - before
	res.FloodSeconds = elapsed.Seconds()
	res.IngestPerSec = float64(res.FloodEvents) / elapsed.Seconds()
	return nil
}

// StartCPUProfile profiles this process into path until the returned
// function is called.
func StartCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// pct returns the p-th percentile of ds in milliseconds.
func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}

// machine describes this host for the report.
func machine() string {
	model := "unknown cpu"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cpus, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// printBench writes the figures as a table.
func printBench(w io.Writer, r Result) {
	t := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(t, "machine\t%s\n", r.Machine)
	fmt.Fprintf(t, "store / sandbox / agent\t%s / %s / %s\n", r.Store, r.Sandbox, r.Agent)
	fmt.Fprintf(t, "sessions × prompts\t%d × %d\n", r.Sessions, r.Prompts)
	fmt.Fprintf(t, "create→active\tp50 %.2f ms\tp99 %.2f ms\n", r.CreateP50Ms, r.CreateP99Ms)
	fmt.Fprintf(t, "  the agent started directly\tp50 %.2f ms\tp99 %.2f ms\tberth %.2f×\n", r.CreateDirectP50Ms, r.CreateDirectP99Ms, r.CreateRatio)
	if r.Prompts > 0 {
		fmt.Fprintf(t, "prompt→first SSE event\tp50 %.2f ms\tp99 %.2f ms\n", r.FirstEventP50Ms, r.FirstEventP99Ms)
	}
	if r.AgentEventP50Ms > 0 {
		fmt.Fprintf(t, "prompt→first agent event\tp50 %.2f ms\tp99 %.2f ms\n", r.AgentEventP50Ms, r.AgentEventP99Ms)
		if r.AgentEventNoShimP50Ms > 0 {
			fmt.Fprintf(t, "  without shims\tp50 %.2f ms\tp99 %.2f ms\tshims %.2f×\n", r.AgentEventNoShimP50Ms, r.AgentEventNoShimP99Ms, r.AgentEventShimRatio)
		}
		fmt.Fprintf(t, "  the agent prompted directly\tp50 %.2f ms\tp99 %.2f ms\tberth %.2f×, +%.2f ms\n", r.AgentEventDirectP50Ms, r.AgentEventDirectP99Ms, r.AgentEventDirectRatio, r.AgentEventAddedP50Ms)
		if r.WorkspaceFiles > 0 || r.PromptGapMs > 0 {
			fmt.Fprintf(t, "  workspaces of %d files, %.0f ms before each prompt\n", r.WorkspaceFiles, r.PromptGapMs)
		}
	}
	if r.FloodEvents > 0 {
		fmt.Fprintf(t, "durable ingest\t%.0f events/s\t(%d events in %.2f s)\n", r.IngestPerSec, r.FloodEvents, r.FloodSeconds)
	}
	if r.FanoutSubscribers > 0 {
		fmt.Fprintf(t, "change→delivery, %d readers × %d sessions\tp50 %.2f ms\tp99 %.2f ms\n", r.FanoutSubscribers, r.FanoutSessions, r.FanoutLatencyP50Ms, r.FanoutLatencyP99Ms)
		fmt.Fprintf(t, "  delivered\t%.0f changes/s\t(%d changes, %d deliveries, %d resyncs; agents logged %.0f events/s)\n", r.FanoutPerSec, r.FanoutChanges, r.FanoutDelivered, r.FanoutResyncs, r.FanoutAgentEventsPerSec)
	}
	if r.PageLogEvents > 0 {
		fmt.Fprintf(t, "page of 1000 at the end of %d events\tp50 %.2f ms\tp99 %.2f ms\n", r.PageLogEvents, r.PageP50Ms, r.PageP99Ms)
	}
	if r.LiveSessions > 0 {
		fmt.Fprintf(t, "daemon start, no session\tAPI %.0f ms\tdaemon CPU %.0f ms\n", r.EmptyAPIMs, r.EmptyCPUMs)
		printBootReads(t, "  every read route answers, empty home", r.EmptyReads)
		fmt.Fprintf(t, "daemon with %d idle sessions (KiB)\tVmRSS %d\tVmHWM %d\tempty %d, %.0f a session\n", r.LiveSessions, r.LiveRSSKB, r.LiveHWMKB, r.EmptyRSSKB, r.LivePerSessionKB)
		fmt.Fprintf(t, "shim memory (KiB, %s)\trss p50 %d\tpss p50 %d\tprivate p50 %d, max %d\n", r.ShimProgram, r.ShimRSSP50KB, r.ShimPSSP50KB, r.ShimPrivateP50KB, r.ShimPrivateMaxKB)
		fmt.Fprintf(t, "all of berth per live session (KiB)\tpss %d\trss %d\t(%d sessions, agents included)\n", r.TotalPSSPerSessionKB, r.TotalRSSPerSessionKB, r.LiveSessions)
		fmt.Fprintf(t, "  daemon and shims alone\tpss %d\t(daemon pss %d in all)\n", r.OwnPSSPerSessionKB, r.DaemonPSSKB)
	}
	if r.ReattachSessions > 0 {
		fmt.Fprintf(t, "boot reattaching %d live sessions\tAPI %.0f ms\tall active %.0f ms\tdaemon CPU %.0f ms\n", r.ReattachSessions, r.ReattachAPIMs, r.ReattachAllMs, r.ReattachCPUMs)
		printBootReads(t, "  every read route answers", r.ReattachReads)
		fmt.Fprintf(t, "  floor: every shim's hello, no daemon\t%.0f ms\tshims' CPU during the boot %.0f ms\n", r.ReattachFloorMs, r.ReattachShimsCPUMs)
		fmt.Fprintf(t, "  daemon after the reattach (KiB)\tVmRSS %d\tVmHWM %d\n", r.ReattachRSSKB, r.ReattachHWMKB)
		for i, b := range r.ReattachBoots {
			fmt.Fprintf(t, "boot %d again: %s\tAPI %.0f ms\tall active %.0f ms\tdaemon CPU %.0f ms, load %.1f\n", i+1, b.Daemon, b.APIMs, b.AllMs, b.CPUMs, b.Load)
			printBootReads(t, "  every read route answers", b.Reads)
		}
		if r.GoneMs > 0 {
			fmt.Fprintf(t, "shims with no daemon for %.0f s\tCPU %.0f ms\t%.1f%% of a core\n", r.GoneMs/1000, r.GoneShimsCPUMs, 100*r.GoneShimsCPUMs/r.GoneMs)
		}
	}
	if r.ScrapeSessions > 0 {
		fmt.Fprintf(t, "GET /metrics, %d sessions (%d live)\tp50 %.2f ms\tp99 %.2f ms\t(%.2f ms CPU, %d bytes)\n", r.ScrapeSessions, r.ScrapeLive, r.ScrapeP50Ms, r.ScrapeP99Ms, r.ScrapeCPUMs, r.ScrapeBytes)
	}
	if r.ListedSessions > 0 {
		fmt.Fprintf(t, "list %d sessions, %d a page\tp50 %.2f ms\tp99 %.2f ms\n", r.ListedSessions, r.ListPageSize, r.ListPageP50Ms, r.ListPageP99Ms)
	}
	fmt.Fprintf(t, "load average\t%.2f\n", r.LoadAverage)
	printChildren(t, r.childrenResult)
	t.Flush()
}
