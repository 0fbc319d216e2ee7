package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"

	"github.com/spf13/cobra"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/bench"
	"github.com/berth-sh/berth/cmd/berth/internal/pretouch"
	"github.com/berth-sh/berth/daemon"
)

// addDaemonCommands registers the commands that run a daemon in this process
// (serve, run, bench) and the hidden agent-demo command.
func addDaemonCommands(root *cobra.Command) {
	bc := bench.NewCommand(bench.Options{Daemon: daemonOptions, Usagef: usagef, JSONOutput: jsonOutput})
	root.AddCommand(newServeCmd(), newRunCmd(), bc, newAgentDemoCmd(), newAgentExecCmd(), newShimCmd(), newMCPCmd())
}

// daemonOptions are the options of every daemon this binary runs: it is
// the berth binary, of this version, carrying its small shim.
func daemonOptions(o daemon.Options) daemon.Options {
	o.Version = versionString()
	o.SmallShim = smallShim
	return o
}

// newServeCmd runs the daemon until SIGINT or SIGTERM.
func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [--addr HOST:PORT] [--home DIR] [--store URL] [--config FILE]",
		Short: "Run the berth daemon",
		Long: "Run the berth daemon: the HTTP API on --addr (default 127.0.0.1:7380) and on the\n" +
			"Unix socket $BERTH_HOME/berth.sock. A non-loopback address needs [server] token.",
		Args: cobra.NoArgs,
		RunE: runServe,
	}
	f := cmd.Flags()
	f.String("store", "", "store URL: sqlite:PATH, postgres://… or memory: (nothing kept after exit) (default: SQLite in the home directory)")
	f.String("config", "", "config file (default $BERTH_HOME/config.toml)")
	f.Bool("debug", false, "log at debug level (--log-level debug)")
	f.String("log-format", "", "log format: text or json (default: text on a terminal, JSON otherwise)")
	f.String("log-level", "info", "log level: debug, info, warn or error")
	f.String("node-id", "", "this node's id among the daemons sharing a PostgreSQL store ([cluster] node_id)")
	f.String("advertise", "", "the URL the other nodes reach this one at, http://host:port ([cluster] advertise)")
	f.Bool("accept-empty-store", false, "start a new store even though the home has the session directories of a lost one")
	return cmd
}

// runServe is the serve command.
func runServe(cmd *cobra.Command, _ []string) error {
	// The owner of pretouch's goroutine, which maps the program's pages
	// beside the start.
	defer pretouch.Wait()
	home, err := homeDir(cmd)
	if err != nil {
		return err
	}
	cfgPath, _ := cmd.Flags().GetString("config")
	cfg, err := loadConfig(home, cfgPath)
	if err != nil {
		return err
	}
	if s, _ := cmd.Flags().GetString("store"); s != "" {
		cfg.Store.URL = s
	}
	if v, _ := cmd.Flags().GetString("node-id"); v != "" {
		cfg.Cluster.NodeID = v
	}
	if v, _ := cmd.Flags().GetString("advertise"); v != "" {
		cfg.Cluster.Advertise = v
	}
	// For serve, --addr is where to listen (the other commands dial it).
	if f := cmd.Flag("addr"); f != nil && f.Changed {
		cfg.Server.Addr = f.Value.String()
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	socket := cfg.Server.Socket
	if socket == "" {
		socket = filepath.Join(home, socketName)
	}
	// The flags win over [server] log_format and log_level.
	format, level := cfg.Server.LogFormat, cfg.Server.LogLevel
	if f := cmd.Flag("log-format"); f.Changed || format == "" {
		format = f.Value.String()
	}
	if f := cmd.Flag("log-level"); f.Changed || level == "" {
		level = f.Value.String()
	}
	if debug, _ := cmd.Flags().GetBool("debug"); debug {
		level = "debug"
	}
	logger, err := newLogger(format, level)
	if err != nil {
		return usagef(cmd, "%s", berth.ErrorMessage(err))
	}
	notify := newNotifier(logger)

	acceptEmpty, _ := cmd.Flags().GetBool("accept-empty-store")

	ctx := cmd.Context()
	stopProfile, err := startBootProfile(os.Getenv("BERTH_BOOT_PROFILE"))
	if err != nil {
		return err
	}
	defer stopProfile(nil)
	d, err := daemon.Open(ctx, daemonOptions(daemon.Options{Home: home, Config: cfg, Addr: cfg.Server.Addr, Socket: socket, Logger: logger,
		AcceptEmptyStore: acceptEmpty,
		LeaveSessions:    !cfg.Server.StopSessionsOnExit}))
	if err != nil {
		return err
	}
	logger.Info("berth serving", "addr", d.Addr(), "socket", socket, "store", d.Store().Name(), "version", versionString())
	d.Start()
	notify.send("READY=1\nSTATUS=serving on " + d.Addr())
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		stopProfile(d.Manager().Booted())
	}()
	defer func() { <-profiled }()
	if err = d.Wait(ctx); err != nil {
		// The API stopped on its own: shut the rest down and report why.
		logger.Error("api server stopped", "err", err)
	} else {
		logger.Info("shutting down")
	}
	notify.send("STOPPING=1\nSTATUS=shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	d.Close(sctx)
	return err
}

// startBootProfile starts a CPU profile of the daemon's boot when prefix
// is set (BERTH_BOOT_PROFILE, for berth bench --boot-profile). The
// function it returns waits for booted (nil: at once), then writes
// PREFIX.cpu, and PREFIX.heap and PREFIX.goroutine once the boot is done.
func startBootProfile(prefix string) (func(booted <-chan struct{}), error) {
	if prefix == "" {
		return func(<-chan struct{}) {}, nil
	}
	// A boot is short: 1,000 samples a second rather than 100 (the
	// profiler then warns once that the rate was set before it started).
	runtime.SetCPUProfileRate(1000)
	stopCPU, err := bench.StartCPUProfile(prefix + ".cpu")
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func(booted <-chan struct{}) {
		if booted != nil {
			<-booted
		}
		once.Do(func() {
			stopCPU()
			runtime.GC()
			for _, p := range []string{"heap", "goroutine"} {
				if f, err := os.Create(prefix + "." + p); err == nil {
					_ = pprof.Lookup(p).WriteTo(f, 0)
					f.Close()
				}
			}
		})
	}, nil
}
