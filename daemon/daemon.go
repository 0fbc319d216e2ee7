// Package daemon assembles a berth daemon in this process: the config, the
// store, the event log, the sandbox providers, the session manager, the
// hooks, the metrics and the HTTP API server with its listeners, opened in
// that order and closed in reverse. `berth serve`, `berth run`'s daemon of
// its own, `berth bench` and tests use it:
//
//	d, err := daemon.Open(ctx, daemon.Options{Home: home, Config: cfg, Socket: sock})
//	if err != nil { … }
//	err = d.Run(ctx) // serves until ctx ends, then closes
package daemon

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/cluster"
	"github.com/berth-sh/berth/config"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/hooks"
	bhttp "github.com/berth-sh/berth/http"
	"github.com/berth-sh/berth/internal/credkey"
	"github.com/berth-sh/berth/internal/homelock"
	"github.com/berth-sh/berth/metrics"
	"github.com/berth-sh/berth/objstore"
	"github.com/berth-sh/berth/sandbox/docker"
	"github.com/berth-sh/berth/sandbox/providers"
	"github.com/berth-sh/berth/session"
	"github.com/berth-sh/berth/session/probe"
	"github.com/berth-sh/berth/shim"
	"github.com/berth-sh/berth/snapshot"
	"github.com/berth-sh/berth/store/memory"
	"github.com/berth-sh/berth/store/postgres"
	"github.com/berth-sh/berth/store/sqlite"
)

// Daemon is one berth daemon assembled in this process: store, event log,
// session manager and API server, opened in that order and closed in reverse.
type Daemon struct {
	cfg    *config.Config
	home   string
	logger *slog.Logger
	// lock is the home's lock, held from before the store opens until
	// after it closes.
	lock   *homelock.Lock
	store  berth.Store
	log    *eventlog.Log
	mgr    *session.Manager
	hooks  *hooks.Service
	srv    *bhttp.Server
	docker *docker.Provider
	// self is the berth binary (Options.Berth); shimJSON the sandbox
	// providers' options as the shims are given them; providers and their
	// probes are made, and the probes started, before the store opens (the
	// manager owns the probes once made).
	self      string
	shimJSON  string
	providers []berth.SandboxProvider
	probes    *probe.Set
	// smallShims are the small shim programs (Options.SmallShim), installed
	// by a goroutine of Open once the probes are over (afterProbes);
	// installing counts it, and the first shim started waits for it
	// (shimOptions).
	smallShims []shim.Program
	installing sync.WaitGroup
	// node is this daemon as a cluster node; nil for one node alone.
	node *cluster.Node
	// stopWatch ends the watch of the other nodes' commits; watched is
	// closed once it has returned (nil when none runs).
	stopWatch context.CancelFunc
	watched   chan struct{}
	// token is what TCP clients must send: [server] token or the one kept
	// in the home ("" only with loopback_without_token).
	token string
	// leaveSessions: see Options.
	leaveSessions bool
	// metrics are the daemon's Prometheus metrics (GET /metrics).
	metrics *metrics.Metrics
	// models is the model gateway the agents call (gateway.go).
	models *modelGateway
	// storage writes sessions' state to the object store (storage.go);
	// nil without [storage] url.
	storage *objstore.Syncer

	// socket is the Unix socket the API listens on ("" for none).
	socket string

	// closed is set by the first Close, which closes closing.
	closed  bool
	closing chan struct{}

	// served receives Serve's result once; serving tells whether it runs.
	served  chan error
	serving bool
}

// Options say where a daemon listens and keeps its data.
type Options struct {
	// Home is the berth home directory (created 0700 when missing).
	Home string
	// Config is the daemon's configuration (config.LoadDefault, Validate).
	Config *config.Config
	// Addr is the TCP address to listen on ("127.0.0.1:0" picks a port);
	// "" means no TCP listener.
	Addr string
	// Socket is the Unix socket to listen on; "" means none.
	Socket string
	// Logger receives the daemon's logs (default: discarded).
	Logger *slog.Logger
	// LeaveSessions leaves the agents running in their shims when the
	// daemon closes, for the next daemon to reattach (berth serve, unless
	// [server] stop_sessions_on_exit); otherwise closing stops them.
	LeaveSessions bool
	// AcceptEmptyStore starts a new SQLite store even where the home has
	// session directories (serve --accept-empty-store).
	AcceptEmptyStore bool
	// NoShims starts agents as the daemon's own children: they die with it
	// (berth run, whose session lives as long as the command).
	NoShims bool
	// Berth is the berth binary, which runs the catalog's built-in agents
	// (the demo agent, `berth mcp`), the shims and the sandboxes' helpers
	// (default: this process's executable).
	Berth string
	// Version is the version /v1/health reports.
	Version string
	// SmallShim returns the small shim programs to run instead of `berth
	// shim` for the shim options given (JSON), self being the berth
	// binary; nil or an empty answer means none.
	SmallShim func(self, home, options string, logger *slog.Logger) []shim.Program
}

// ShutdownTimeout bounds a graceful shutdown.
const ShutdownTimeout = 30 * time.Second

// daemonGCPercent is the GOGC a daemon runs with unless GOGC is set: its
// live heap is small and the event path allocates per event, so trading a
// few megabytes of heap for a quarter of the collections pays.
const daemonGCPercent = 400

// Open opens everything a daemon needs and listens; Start (or Run) serves.
// On error nothing is left open.
func Open(ctx context.Context, opts Options) (_ *Daemon, err error) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(daemonGCPercent)
	}
	o := opts
	if o.Config == nil {
		return nil, berth.Errorf(berth.EInvalid, "daemon: no config")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := privateHome(o.Home); err != nil {
		return nil, err
	}
	d := &Daemon{cfg: o.Config, home: o.Home, logger: o.Logger, leaveSessions: o.LeaveSessions, token: o.Config.Server.Token,
		socket: o.Socket, closing: make(chan struct{})}
	defer func() {
		if err != nil {
			d.Close(context.WithoutCancel(ctx))
		}
	}()
	// The sandbox probes (bwrap's trial run: tens of milliseconds, which
	// the first create waits for) touch nothing of the home: on the other
	// core from the first moment.
	if err = d.startProbes(ctx, o); err != nil {
		return nil, err
	}
	// The home is ours before the store, the shims or any agent is
	// touched: a second daemon must not recover the first one's sessions.
	if d.lock, err = homelock.Acquire(o.Home); err != nil {
		return nil, err
	}
	// Under the lock: a torn token is replaced by this daemon alone.
	if err = d.ensureTCPToken(o); err != nil {
		return nil, err
	}
	if err = d.openStore(ctx, o); err != nil {
		return nil, err
	}
	d.installing.Go(func() { d.afterProbes(o) })
	node := nodeID(o.Home)
	if id := o.Config.Cluster.NodeID; id != "" {
		node = id
	}
	if err = d.joinCluster(ctx, o); err != nil {
		return nil, err
	}
	// The scrape-time sources are set once the manager and the hooks exist.
	var census func(context.Context) (session.Census, error)
	var hookCounters func() hooks.Counters
	d.metrics = metrics.New(metrics.Options{
		Census: func(ctx context.Context) (session.Census, error) { return census(ctx) },
		Hooks:  func() hooks.Counters { return hookCounters() },
	})
	d.log = eventlog.New(d.store, eventlog.Options{Logger: o.Logger, SessionBytes: o.Config.Limits.SessionInflightBytes,
		Observer: d.metrics})
	if err = d.log.Open(); err != nil {
		return nil, err
	}
	if err = d.newManager(o, node); err != nil {
		return nil, err
	}
	census, hookCounters = d.mgr.Census, d.hooks.Counters
	if err = d.mgr.Open(ctx); err != nil {
		return nil, err
	}
	if d.node != nil {
		// The heartbeat renews the leases the boot took; it runs until Close.
		d.node.Start(d.mgr)
		d.watchEvents(o.Logger)
	}
	if err = d.hooks.Open(ctx, d.mgr); err != nil {
		return nil, err
	}
	if err = d.listen(o); err != nil {
		return nil, err
	}
	if d.node != nil {
		// Sessions of a lost node move to others through the forwarding client.
		d.node.SetHandoff(d.srv)
	}
	return d, nil
}

// ensureTCPToken makes sure a TCP listener has a token to check: [server]
// token, or the one kept in the home (made on first use), unless the
// listener is on loopback and loopback_without_token is set.
func (d *Daemon) ensureTCPToken(o Options) error {
	if o.Addr == "" || d.token != "" {
		return nil
	}
	// Another machine's clients need a token configured, not one
	// generated into this home.
	if err := bhttp.RequireLoopback(o.Addr); err != nil {
		return err
	}
	if o.Config.Server.LoopbackWithoutToken {
		o.Logger.Warn("server.loopback_without_token is set: the TCP API on loopback needs no token, " +
			"so any local user, and any sandbox that reaches 127.0.0.1, can run commands as this user")
		return nil
	}
	var err error
	d.token, err = ensureToken(o.Home)
	return err
}

// afterProbes, once the sandbox probes are over, warms the store (its
// statements) and installs the small shim: on a goroutine Close waits
// for, beside the start. The probes (bwrap's trial sandbox, tens of
// milliseconds) share the two cores with the daemon's way to its API, and
// these would share them too; a create waits for the probes anyway, and
// a read that comes first warms the store itself.
func (d *Daemon) afterProbes(o Options) {
	select {
	case <-d.probes.Done():
	case <-d.closing:
	}
	// Closed before the probes were over (a failed open, a stop at
	// once): nothing to warm or install for.
	select {
	case <-d.probes.Done():
	default:
		return
	}
	if w, ok := d.store.(interface{ Warm() }); ok {
		w.Warm()
	}
	if o.SmallShim != nil && !o.NoShims {
		d.smallShims = o.SmallShim(d.self, o.Home, d.shimJSON, o.Logger)
	}
}

// startProbes makes the sandbox providers and starts their probes, which
// need neither the home nor the store.
func (d *Daemon) startProbes(ctx context.Context, o Options) error {
	d.self = o.Berth
	if d.self == "" {
		var err error
		if d.self, err = os.Executable(); err != nil {
			return berth.WrapError(berth.EInternal, err, "cannot find the berth binary")
		}
	}
	po := newProviderOptions(o.Config, d.self, o.Home)
	pob, _ := json.Marshal(po)
	d.shimJSON = string(pob)
	all, dk, err := providers.All(po.Options)
	if err != nil {
		return err
	}
	d.providers, d.docker = all, dk
	byName := make(map[string]berth.SandboxProvider, len(all))
	for _, p := range all {
		byName[p.Name()] = p
	}
	d.probes = probe.New(byName)
	d.probes.Start(ctx)
	return nil
}

// openStore opens the store the config names.
func (d *Daemon) openStore(ctx context.Context, o Options) error {
	var err error
	storeCfg := o.Config.Store
	if o.Config.ClusterEnabled() {
		storeCfg.URL = clusterStoreURL(storeCfg.URL, o.Config.Cluster.LeaseTTL.Duration)
	}
	// The migrations it applies are logged at debug: a terminal running
	// berth serve is no place for them.
	if d.store, err = openStore(ctx, o.Home, storeCfg, o.Config.Credentials, o.AcceptEmptyStore, debugInfo(o.Logger)); err != nil {
		return err
	}
	if d.store.Name() == memory.Name {
		// Agents left running for the next daemon would find no store to
		// reattach from: with a memory store, closing stops them.
		d.leaveSessions = false
		o.Logger.Warn("the store is in memory (memory:): every session, its events and its queue are lost when " +
			"the daemon exits, and sessions are stopped then instead of left running")
	}
	return nil
}

// newManager makes the session manager (not yet open) with what it runs
// sessions with: the berth binary, the agent catalog, the sandbox
// providers, the run directory, the shims and the hooks service.
func (d *Daemon) newManager(o Options, node string) error {
	self := d.self
	catalog, err := o.Config.Catalog(self)
	if err != nil {
		return err
	}
	ckpts := checkpointStore(o.Home, o.Config.Checkpoints)
	restorer, err := d.storageRestorer(o, ckpts)
	if err != nil {
		return err
	}
	// npx agents fetched ahead (berth agents install) live in the home.
	catalog.WithPackages(filepath.Join(o.Home, "agents"))
	runDir := filepath.Join(o.Home, "run")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return berth.WrapError(berth.EInternal, err, "cannot create %s", runDir)
	}
	shimOpts := d.shimOptions(o, self)
	if d.models, err = openGateway(o.Config, d.store, o.Home, o.Logger); err != nil {
		return err
	}
	if d.hooks, err = hooks.New(hooks.Options{Store: d.store, Hooks: hookList(o.Config.Hooks), Owner: node, Logger: o.Logger}); err != nil {
		return err
	}
	lim := o.Config.Limits
	// Load has checked it.
	netDefault, _ := o.Config.Sandbox.NetworkPolicy()
	snaps := snapshot.New(filepath.Join(o.Home, "snapshots"))
	hidden := daemonFiles(o.Socket, o.Config.Store.URL, o.Config.Credentials.KeyFile,
		o.Config.Storage.AccessKeyFile, o.Config.Storage.SecretKeyFile)
	if err := d.openStorage(o, ckpts, snaps, hidden); err != nil {
		return err
	}
	d.mgr = session.New(session.Options{
		Store: d.store, Log: d.log, Catalog: catalog,
		Providers: d.providers, Probes: d.probes,
		Sandbox: session.SandboxPolicy{Default: o.Config.Sandbox.Default, AllowHost: o.Config.Sandbox.AllowHost,
			RequireIsolation: o.Config.Sandbox.RequireIsolation, AllowNetwork: o.Config.Sandbox.AllowNetwork,
			Network: netDefault, Limits: o.Config.Sandbox.Limits(), Mounts: o.Config.Sandbox.MountList(),
			MaxMemoryMB: o.Config.Sandbox.MaxMemoryMB},
		Limits: session.Limits{MaxPromptBytes: lim.MaxPromptBytes, MaxSessions: lim.MaxSessions,
			HandshakeTimeout: lim.HandshakeTimeout.Duration, StopGrace: lim.StopGrace.Duration,
			CancelGrace: lim.CancelGrace.Duration, MaxLineBytes: lim.MaxLineBytes, MaxTurnOutput: int64(lim.MaxTurnOutput),
			MaxQueue: lim.MaxQueue, PermissionTimeout: lim.PermissionTimeout.Duration,
			StallAfter: lim.StallAfter.Duration, StallTimeout: lim.StallTimeout.Duration, IdleTimeout: lim.IdleTimeout.Duration,
			MaxChildren: childLimit(lim.MaxChildren), MaxDepth: childLimit(lim.MaxDepth)},
		Home: o.Home, NodeID: node, Version: o.Version, Logger: o.Logger, UserHome: userHome(),
		Snapshots:   snaps,
		Checkpoints: ckpts,
		Shim:        shimOpts, RunDir: runDir, Hidden: hidden,
		// The hooks' one point on the event path: told of every commit.
		OnCommit: d.hooks.Notify, BeforeDelete: d.hooks.Flush,
		// Once the boot knows which sessions it reattached.
		AfterBoot: d.removeLeftoverContainers,
		Berth:     self,
		ToolsHandler: func(open berth.ToolsOpener) http.Handler {
			return bhttp.NewToolsHandler(open, lim.MaxPromptBytes, o.Version, o.Logger)
		},
		Observer: d.metrics,
		Cluster:  d.sessionCluster(),
		Models:   d.models.options(),
		Storage:  d.storageHook(),
		Restorer: restorer,
	})
	// Served from now on: the boot's reattached agents call it at once.
	d.models.start(d.mgr)
	return nil
}

// shimOptions are how the manager starts the shims that hold its agents
// (`berth shim` with the providers' options, or the small shim), nil when
// it runs agents as its own children (Options.NoShims).
func (d *Daemon) shimOptions(o Options, self string) *session.ShimOptions {
	if o.NoShims {
		return nil
	}
	shimOpts := &session.ShimOptions{Argv: []string{self, "shim", "--options", d.shimJSON},
		Orphan: o.Config.Limits.OrphanTimeout.Duration}
	if d.node != nil {
		// A node that dies leaves no agent running unowned past the
		// moment the others take its sessions over.
		shimOpts.Orphan = o.Config.Cluster.LeaseTTL.Duration
	}
	// The small shim's install goes on once the probes are over
	// (afterProbes): only the first shim started waits for it.
	shimOpts.Programs = func() []shim.Program {
		d.installing.Wait()
		return d.smallShims
	}
	return shimOpts
}

// listen makes the API server and its listeners, and records where it
// listens in the home's lock.
func (d *Daemon) listen(o Options) error {
	sc, lim := o.Config.Server, o.Config.Limits
	d.srv = bhttp.NewServer(d.metrics.CountStreams(d.mgr), bhttp.ServerOptions{Token: d.token, LoopbackWithoutToken: sc.LoopbackWithoutToken,
		AllowedHosts: sc.AllowedHosts, AllowedOrigins: sc.AllowedOrigins, SessionTTL: sc.SessionTTL.Duration,
		BodyTimeout: sc.BodyTimeout.Duration, MaxConnections: sc.MaxConnections,
		MaxPromptBytes: lim.MaxPromptBytes, Logger: o.Logger, Version: o.Version, Hooks: d.hooks,
		Metrics: d.metrics.Handler(), Cluster: d.httpCluster(), Credentials: d.store, SignIns: d.store,
		Reading: d.mgr.Reading})
	if err := d.srv.Listen(o.Addr, o.Socket); err != nil {
		d.srv = nil
		return err
	}
	where := d.srv.Addr()
	if where == "" {
		where = "unix:" + o.Socket
	}
	return d.lock.SetAddr(where)
}

// Start serves the API in a goroutine that Close waits for.
func (d *Daemon) Start() {
	d.served = make(chan error, 1)
	d.serving = true
	go func() { d.served <- d.srv.Serve() }()
}

// Wait blocks until ctx ends (nil) or the API server stops on its own
// (its error), after Start.
func (d *Daemon) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.served:
		d.serving = false
		if err == nil {
			err = berth.Errorf(berth.EInternal, "the API server stopped")
		}
		return err
	}
}

// Run serves until ctx ends or the API server stops on its own, then
// closes the daemon (within ShutdownTimeout) and returns why it stopped:
// nil when ctx ended.
func (d *Daemon) Run(ctx context.Context) error {
	d.Start()
	err := d.Wait(ctx)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	d.Close(cctx)
	return err
}

// Close shuts the daemon down in reverse order of opening: the API first
// (no new work), then the sessions, then the log (flushing every event),
// then the store. ctx bounds the graceful part. A second Close does
// nothing.
func (d *Daemon) Close(ctx context.Context) {
	if d.closed {
		return
	}
	d.closed = true
	close(d.closing)
	if d.srv != nil {
		if err := d.srv.Close(ctx); err != nil {
			d.logger.Warn("api server close", "err", err)
		}
		if d.serving {
			if err := <-d.served; err != nil {
				d.logger.Warn("api server", "err", err)
			}
			d.serving = false
		}
	}
	if d.hooks != nil {
		// Attempts in flight are cut and stay pending for the next start.
		if err := d.hooks.Close(ctx); err != nil {
			d.logger.Warn("hooks close", "err", err)
		}
	}
	// A failed open may leave the small shim's install running.
	d.installing.Wait()
	if d.mgr != nil {
		if err := d.mgr.Shutdown(ctx, !d.leaveSessions); err != nil {
			d.logger.Warn("session manager close", "err", err)
		}
	} else if d.probes != nil {
		// The probes started before a failed open; the manager owns them
		// once made.
		if err := d.probes.Close(ctx); err != nil {
			d.logger.Warn("sandbox probes close", "err", err)
		}
	}
	if d.storage != nil {
		// After the sessions: their last turns' ends are queued by now,
		// and are written within a bound.
		sctx, cancel := context.WithTimeout(ctx, storageDrain)
		d.storage.Close(sctx)
		cancel()
	}
	if d.models != nil {
		// The sessions have stopped (their keys with them) or carry on
		// to the next daemon, which serves their gateway again.
		if err := d.models.close(ctx); err != nil {
			d.logger.Warn("model gateway close", "err", err)
		}
	}
	if d.node != nil {
		// Sessions left running stay this node's: a restart within
		// lease_ttl carries them on, else the others close them
		// (node_lost). Sessions stopped, the node leaves.
		d.node.Close(ctx, !d.leaveSessions)
	}
	if d.docker != nil {
		if err := d.docker.Close(); err != nil {
			d.logger.Warn("docker client close", "err", err)
		}
	}
	if d.stopWatch != nil {
		d.stopWatch()
		<-d.watched
	}
	if d.log != nil {
		if err := d.log.Close(ctx); err != nil {
			d.logger.Warn("event log close", "err", err)
		}
	}
	if d.store != nil {
		if err := d.store.Close(); err != nil {
			d.logger.Warn("store close", "err", err)
		}
	}
	if d.lock == nil {
		return
	}
	if err := d.lock.Release(); err != nil {
		d.logger.Warn("home lock release", "err", err)
	}
}

// daemonFiles are the daemon's files that may live outside its home and
// that no sandbox may see: the API socket, a SQLite database (with its
// journal files and its credentials file) and the key files (credentials,
// object store).
func daemonFiles(socket, storeURL string, keyFiles ...string) []string {
	var out []string
	if socket != "" {
		out = append(out, socket)
	}
	if strings.HasPrefix(storeURL, "sqlite:") {
		if db := strings.TrimPrefix(strings.TrimPrefix(storeURL, "sqlite:"), "//"); db != "" {
			out = append(out, db, db+"-wal", db+"-shm", db+"-journal", sqlite.CredentialsPath(db))
		}
	}
	for _, f := range keyFiles {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// openStore opens the store a URL names: "" or "sqlite:PATH" for SQLite,
// postgres://… for PostgreSQL (connecting within a bounded time), memory:
// for an empty store in memory.
// A SQLite file is checked first (checkSQLiteFile); acceptEmpty lets a new
// store start beside the session directories of a lost one. PostgreSQL
// seals credentials with the key of cc.KeyFile (docs/api.md, Credentials).
func openStore(ctx context.Context, home string, sc config.Store, cc config.Credentials, acceptEmpty bool, logger *slog.Logger) (berth.Store, error) {
	url := sc.URL
	// Each branch returns a nil interface on error, never a typed nil.
	switch {
	case url == "", strings.HasPrefix(url, "sqlite:"):
		path, err := sqlitePath(home, url)
		if err != nil {
			return nil, err
		}
		if err := checkSQLiteFile(path, home, acceptEmpty); err != nil {
			return nil, err
		}
		st, err := sqlite.Open(ctx, path, sqlite.Options{Sync: sc.Sync, Logger: logger})
		if err != nil {
			// The daemon's user reads this: the cause is what they need.
			return nil, berth.WrapError(berth.EUnavailable, err, "cannot open the store %s: %v", path, err)
		}
		return st, nil
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		var key []byte
		if cc.KeyFile != "" {
			var err error
			if key, err = credkey.Read(cc.KeyFile); err != nil {
				return nil, err
			}
		}
		st, err := postgres.Open(ctx, url, postgres.Options{Logger: logger, CredentialKey: key})
		if err != nil {
			return nil, err
		}
		return st, nil
	case url == config.MemoryURL:
		return memory.New(), nil
	}
	return nil, berth.Errorf(berth.EInvalid, "store url must be sqlite:PATH, postgres://… or memory:")
}

// sqlitePath is the database file of a SQLite store URL ("" or
// "sqlite:PATH"): berth.db in the home when the URL names none.
func sqlitePath(home, url string) (string, error) {
	if url == "" {
		return filepath.Join(home, "berth.db"), nil
	}
	path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite:"), "//")
	if path == "" {
		return "", berth.Errorf(berth.EInvalid, "store url %q names no file", url)
	}
	return path, nil
}

// privateHome creates the home directory, or makes an existing one, 0700:
// it holds the token, the store and the socket, which are the daemon's
// user's alone.
func privateHome(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return berth.WrapError(berth.EInvalid, err, "cannot create the berth home directory")
	}
	fi, err := os.Stat(home)
	if err != nil {
		return berth.WrapError(berth.EInvalid, err, "cannot read the berth home directory")
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(home, 0o700); err != nil {
			return berth.WrapError(berth.EInvalid, err, "cannot make the berth home directory private")
		}
	}
	return nil
}

// childLimit maps a [limits] child limit to session.Limits, where 0 is
// the default: a configured 0 (no children) becomes -1.
func childLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// userHome is the daemon user's home directory, where agents' home_files
// (credentials) are read from; "" when there is none.
func userHome() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
}

// removeLeftoverContainers removes the containers a previous daemon of this
// home left, except those of the sessions reattached (the engine may be
// shared: only this node's are touched).
func (d *Daemon) removeLeftoverContainers(ctx context.Context, keep map[string]bool) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if d.docker.Probe(pctx) != nil {
		return
	}
	if n, err := d.docker.RemoveLeftovers(pctx, keep); err != nil {
		d.logger.Warn("docker: leftover containers not removed", "err", err)
	} else if n > 0 {
		d.logger.Info("docker: removed containers a previous daemon left", "count", n)
	}
}

// hookList turns the [[hooks]] entries into the hooks service's hooks.
func hookList(entries []config.Hook) []hooks.Hook {
	out := make([]hooks.Hook, 0, len(entries))
	for i, h := range entries {
		out = append(out, hooks.Hook{Name: h.HookName(i), Index: i, Events: h.Events, Agent: h.Agent, Labels: h.Labels,
			URL: h.URL, Secret: h.Secret, Command: h.Command, Args: h.Args, Timeout: h.Timeout.Duration})
	}
	return out
}

// checkpointStore is the daemon's checkpoint store, nil when [checkpoints]
// enabled = false.
func checkpointStore(home string, c config.Checkpoints) *checkpoint.Store {
	if !c.Enabled {
		return nil
	}
	return checkpoint.New(filepath.Join(home, "checkpoints"), checkpoint.Options{
		MaxFileBytes: int64(c.MaxFileBytes), MaxTotalBytes: int64(c.MaxTotalBytes), MaxTreeBytes: int64(c.MaxTreeBytes)})
}

// joinCluster makes the daemon a node of the cluster its config names
// (a PostgreSQL store and [cluster] node_id): the store is fenced and the
// node registered before any session is looked at. A node id with
// another store is refused: only PostgreSQL is shared.
func (d *Daemon) joinCluster(ctx context.Context, o Options) error {
	cc := o.Config.Cluster
	if cc.NodeID == "" {
		return nil
	}
	if !o.Config.ClusterEnabled() {
		return berth.Errorf(berth.EInvalid, "cluster.node_id is set but the store is %s: several nodes share one PostgreSQL store; with SQLite there is one node", d.store.Name())
	}
	if cc.Token == "" {
		return berth.Errorf(berth.EInvalid, "cluster.node_id is set but cluster.token is empty: every node of a cluster needs the node token")
	}
	node, err := cluster.New(cluster.Options{ID: cc.NodeID, Advertise: cc.Advertise, TTL: cc.LeaseTTL.Duration, Token: cc.Token,
		Failover: o.Config.FailoverMode() == config.FailoverResume,
		Store:    d.store, Processes: session.SessionProcesses, Logger: o.Logger})
	if err != nil {
		return err
	}
	if err := node.Join(ctx); err != nil {
		return err
	}
	d.node = node
	return nil
}

// sessionCluster is the manager's cluster: the node, or nil for one node.
func (d *Daemon) sessionCluster() session.Cluster {
	if d.node == nil {
		return nil
	}
	return d.node
}

// httpCluster is the API server's cluster: the node, or nil for one node.
func (d *Daemon) httpCluster() bhttp.Cluster {
	if d.node == nil {
		return nil
	}
	return d.node
}

// Node is the daemon's cluster node, nil when it runs alone.
func (d *Daemon) Node() *cluster.Node { return d.node }

// watchEvents makes this node's streams follow the sessions other nodes
// write: every commit of events in the store (PostgreSQL NOTIFY) wakes the
// streams of its session, which read the store again (the log stays the
// truth). It runs until Close.
func (d *Daemon) watchEvents(logger *slog.Logger) {
	w, ok := d.store.(berth.EventWatcher)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.stopWatch, d.watched = cancel, make(chan struct{})
	go func() {
		defer close(d.watched)
		notice := func(id string, last int64) {
			d.log.Notify(id, last)
			d.mgr.RemoteCommitted(id)
		}
		if err := w.WatchEvents(ctx, notice); err != nil && ctx.Err() == nil {
			logger.Error("the watch of other nodes' events stopped: streams of their sessions see new events only when they poll", "err", err)
		}
	}()
}

// idleTxParam is PostgreSQL's limit on a session idle inside a
// transaction, which ends the session (and its locks) past it.
const idleTxParam = "idle_in_transaction_session_timeout"

// clusterStoreURL is a cluster node's store URL: its connections end a
// transaction left idle for half the lease TTL (at least 500 ms), unless
// the URL sets the limit itself. A node frozen in the middle of a
// transaction (SIGSTOP, a VM paused) would otherwise hold its row locks,
// and with them the other nodes' marking it lost and taking its sessions
// over, for as long as it stays frozen. berth's transactions never wait
// between their statements.
func clusterStoreURL(raw string, ttl time.Duration) string {
	u, err := url.Parse(raw)
	if err != nil {
		// openStore reports it.
		return raw
	}
	q := u.Query()
	if q.Get(idleTxParam) == "" {
		q.Set(idleTxParam, strconv.FormatInt(max(ttl/2, 500*time.Millisecond).Milliseconds(), 10))
		u.RawQuery = q.Encode()
	}
	return u.String()
}
