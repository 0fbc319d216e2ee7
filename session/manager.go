// Package session is berth's session manager. It implements
// berth.SessionService: it keeps the set of sessions live here, the store
// of every session and where each runs. A live session — its agent, ACP
// connection, turns, queue and asks — is package session/live's; the
// manager makes it (one pipeline: birth.go), finds it (set.go) and hands
// it what it needs from outside through live.Host (host.go).
//
// Where things are: the API's calls by area (query.go, queue.go, turn.go,
// patch.go, checkpoint.go, snapshot.go, elicitation.go, permission.go,
// exec.go, clear.go, auth.go, census.go, repair.go); the manager's parts,
// one type each: the set of live sessions (set.go), where a session runs
// (placement.go: sandbox, workspace, mounts, worktrees, home files), the
// trees of sessions (children.go), the model calls' usage and the budgets
// (usage.go), the all-sessions stream (changes.go,
// remote.go), the supervisor (supervise.go, sweep.go), what a previous
// daemon left (boot.go, reattach.go, reconcile.go), the logs read a turn
// at a time (transcript.go; folded by session/transcript), the berth
// tools sockets (toolgate.go, tools.go) and the leases of a cluster
// (cluster.go).
//
// Lock order, outermost first: a session lock (sessionlock.go), a
// parent's tree lock (children.go), the set's mutex (set.go), then a live
// session's own locks (session/live). No lock of the manager is taken
// while a live session's lock is held: a live session calls the manager
// only through live.Host's callbacks, with none of its locks held.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/gateway/egress"
	"github.com/berth-sh/berth/internal/syncx"
	"github.com/berth-sh/berth/shim"
	"github.com/berth-sh/berth/snapshot"

	live "github.com/berth-sh/berth/session/live"
	"github.com/berth-sh/berth/session/probe"
)

// Catalog resolves agent names to how they are started.
type Catalog interface {
	Get(name string) (berth.AgentSpec, bool)
	List() []berth.AgentInfo
}

// SandboxPolicy says which providers a session may use.
type SandboxPolicy struct {
	// Default is the provider for sessions that name none ("auto" picks
	// bwrap where it works, else host with a runtime_warning).
	Default          string
	AllowHost        bool
	RequireIsolation bool
	AllowNetwork     bool
	// Network is the network of sessions that do not ask for one.
	Network berth.NetworkPolicy
	// Limits are the resource limits every sandbox gets; MemoryBytes is
	// the default of sessions that ask for no memory_mb.
	Limits berth.SandboxLimits
	// Mounts are the [[sandbox.mounts]] sessions may ask for by name.
	Mounts []berth.Mount
	// MaxMemoryMB caps the memory_mb a session may ask for; 0 means no
	// cap.
	MaxMemoryMB int
}

// Options configure a Manager.
type Options struct {
	Store     berth.Store
	Log       *eventlog.Log
	Catalog   Catalog
	Providers []berth.SandboxProvider
	// Probes are Providers' probes (probe.New over the same providers),
	// which the caller may have started ahead so that they overlap its
	// own start; the manager owns them from New on. nil: made here.
	Probes  *probe.Set
	Sandbox SandboxPolicy
	Limits  live.Limits
	// Home is $BERTH_HOME: managed workspaces and per-session state live
	// under it.
	Home    string
	NodeID  string
	Version string
	// Snapshots keeps workspace archives ($BERTH_HOME/snapshots); nil
	// disables snapshots.
	Snapshots *snapshot.Store
	// Checkpoints keeps the workspace before every turn
	// ($BERTH_HOME/checkpoints; docs/api.md, "Checkpoints, rewind and fork"); nil turns them off.
	Checkpoints *checkpoint.Store
	// UserHome is the home directory agents' home_files are read from (the
	// daemon user's); "" binds none.
	UserHome string
	// Shim, when set, starts every agent in a shim of its own: agents
	// outlive the daemon, and the next one reattaches to them.
	Shim *live.ShimOptions
	// Hidden are host paths besides Home that no sandbox may see (the API
	// socket and the database when they live outside Home).
	Hidden []string
	// RunDir holds the shims' sockets, spools and logs ($BERTH_HOME/run).
	// Sessions found with a shim at boot are reattached even when Shim is
	// nil.
	RunDir string
	// Changes tune the all-sessions stream.
	Changes ChangeOptions
	// OnCommit, when set, is told the sessions of every committed batch
	// of events, on the event log's writer goroutine (the hooks' outbox
	// scanner): it must return at once and never call the log.
	OnCommit func(sessionID string)
	// BeforeDelete, when set, is called when a session's log is complete
	// and about to be deleted (the hooks read what they have not read yet).
	// An error is logged; the session is deleted anyway.
	BeforeDelete func(ctx context.Context, sessionID string) error
	// AfterBoot, when set, is called once every session found live at
	// boot is reattached or closed, with the ids of those live (the
	// daemon removes the containers of the others).
	AfterBoot func(ctx context.Context, live map[string]bool)
	// Berth is the berth binary (os.Executable()), which agents run as
	// their berth MCP server (`berth mcp`); ToolsHandler serves that
	// server's calls on a session's tools socket. Without both, no agent
	// is given the berth tools.
	Berth        string
	ToolsHandler func(open berth.ToolsOpener) http.Handler
	// Models points the agents at the daemon's model gateway; nil points
	// them at none.
	Models *ModelGateway
	// Egress configures the egress proxies of the sessions with an allow
	// list (netpol.go); its zero value takes egress's defaults, and its
	// Logger and AskTimeout are the manager's.
	Egress egress.Options
	// Observer is told of creates, turns, permission decisions and agent
	// exits (metrics); nil tells no one.
	Observer live.Observer
	// Restorer, when set, lets a session move here from another node: a
	// resume restores its managed workspace and HOME from it (move.go).
	Restorer berth.Restorer
	// Cluster, when set, makes the manager a node of a cluster: sessions
	// are driven under their lease (see Cluster); nil is one node.
	Cluster Cluster
	// Storage, when set, is told of every turn's end (docs/api.md,
	// "Session state in an object store").
	Storage Storage
	Logger  *slog.Logger
}

// Storage copies sessions' state off the node at each turn's end.
// TurnEnded is called holding no lock of the session and must return at
// once: a store that is slow or down never slows a turn.
type Storage interface {
	TurnEnded(sessionID, turnID string)
	// Deleted removes a deleted session's own objects from the store.
	Deleted(sessionID string)
}

// HomeDir is session id's private HOME on this node (where its agent
// keeps its own conversation).
func (m *Manager) HomeDir(id string) string { return m.place.homeDir(id) }

// Manager owns the sessions: the live ones here, and the store of all.
type Manager struct {
	// reads are the API's short reads in flight, which a boot's reattach
	// lets through first.
	reads readGate
	opts  Options
	// host is the manager's side of the seam to its live sessions.
	host *live.Host
	// shimKey makes the tokens that sign the shims' reports (shimToken).
	shimKey   []byte
	store     berth.Store
	log       *eventlog.Log
	logger    *slog.Logger
	providers map[string]berth.SandboxProvider
	// probes say which providers work here (availability).
	probes *probe.Set

	// set is the sessions live here (set.go).
	set      sessionSet
	inflight sync.WaitGroup // API calls that may start a session
	// supervisor looks at each live session when due (supervise.go).
	supervisor supervisor
	monitors   sync.WaitGroup // one monitor goroutine per started agent
	// hush holds checkpoint work back while a turn waits for its agent.
	hush *live.Hush
	// launcher starts shims (nil without Options.Shim).
	launcher *shim.Launcher
	sweeper  sweeper
	// sessions serialise a delete against resumes and snapshots of the
	// same session.
	sessions sessionLocks
	// trees are the sessions' trees (children.go).
	trees trees
	// changes is the all-sessions stream's publisher.
	changes *changes
	// recovery takes over what a previous daemon left (boot.go).
	recovery recovery
	// place says where and how a session runs: its sandbox, workspace,
	// mounts and files (placement.go).
	place placement
	// transcripts read sessions' logs a turn at a time (transcript.go).
	transcripts transcripts
	// tools serves the live sessions' berth tools sockets.
	tools toolGate
	// models points the agents at the model gateway (modelgate.go).
	models modelGate
	// net serves the egress proxies of allow lists (netpol.go).
	net netGate
	// leases are the sessions' leases in a cluster (cluster.go).
	leases leases
	// usage counts the model calls and keeps the budgets (usage.go).
	usage usage
}

var _ berth.SessionService = (*Manager)(nil)

// New returns a manager; Open must be called before use.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Observer == nil {
		opts.Observer = noObserver{}
	}
	if opts.Limits.HandshakeTimeout <= 0 {
		opts.Limits.HandshakeTimeout = 30 * time.Second
	}
	if opts.Limits.StopGrace <= 0 {
		opts.Limits.StopGrace = 5 * time.Second
	}
	if opts.Limits.CancelGrace <= 0 {
		opts.Limits.CancelGrace = 10 * time.Second
	}
	if opts.Limits.MaxQueue <= 0 {
		opts.Limits.MaxQueue = 10
	}
	if opts.Limits.StallAfter <= 0 {
		opts.Limits.StallAfter = 2 * time.Minute
	}
	if opts.Limits.SuperviseEvery <= 0 {
		opts.Limits.SuperviseEvery = time.Second
	}
	if opts.Limits.PermissionTimeout <= 0 {
		opts.Limits.PermissionTimeout = 5 * time.Minute
	}
	if opts.Sandbox.Default == "" {
		opts.Sandbox.Default = berth.SandboxAuto
	}
	m := &Manager{
		opts: opts, store: opts.Store, log: opts.Log, logger: opts.Logger,
		providers: make(map[string]berth.SandboxProvider),
		set:       newSessionSet(opts.Limits.MaxSessions),
		hush:      live.NewHush(0),
		changes:   newChanges(opts.Changes),
		recovery:  recovery{booted: make(chan struct{})},
		usage:     usage{spends: make(map[string]*spend)},
	}
	for _, p := range opts.Providers {
		m.providers[p.Name()] = p
	}
	m.probes = opts.Probes
	if m.probes == nil {
		m.probes = probe.New(m.providers)
	}
	m.net.m, m.tools.m, m.models.m, m.trees.m, m.changes.m, m.leases.m, m.supervisor.m, m.recovery.m, m.place.m, m.transcripts.m = m, m, m, m, m, m, m, m, m, m
	m.usage.m = m
	m.sweeper.logger = m.logger
	m.host = m.newLiveHost()
	return m
}

// Open probes the sandbox providers once, in the background, and
// reconciles sessions a previous daemon left live.
func (m *Manager) Open(ctx context.Context) error {
	m.probes.Start(ctx)
	for _, dir := range []string{m.place.workspacesDir(), m.place.sessionsDir()} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return berth.WrapError(berth.EInternal, err, "create %s", filepath.Base(dir))
		}
	}
	if m.opts.Shim != nil {
		// Before any shim's report is read, a reattached one's included.
		key, err := loadShimKey(m.opts.Home)
		if err != nil {
			return berth.WrapError(berth.EInternal, err, "the shims' key")
		}
		m.shimKey = key
	}
	// What the previous daemon's shims left in the run directory, before
	// any session of this daemon adds its own.
	// Read once for the shims' files and the sockets' directories: with a
	// thousand sessions it holds five thousand entries, tens of
	// milliseconds of system calls read beside the store's.
	var runEntries []os.DirEntry
	var scan sync.WaitGroup
	scan.Go(func() { runEntries, _ = shim.ReadRunDir(m.tools.runDir()) })
	attach, resume, err := m.recovery.reconcile(ctx)
	scan.Wait()
	if err != nil {
		return err
	}
	// A parent stopped while the daemon was down takes its children along.
	m.trees.stopOrphans(ctx)
	// The tools sockets of sessions that stopped while no daemon ran go;
	// those of sessions the boot reattaches stay (their sandboxes have the
	// directory bound), to be served again.
	keep := make(map[string]bool, len(attach))
	for _, s := range attach {
		keep[s.ID] = true
	}
	m.tools.removeStale(runEntries, keep)
	m.models.removeStale(runEntries, keep)
	if so := m.opts.Shim; so != nil {
		spare := so.Spare
		if spare == 0 {
			spare = 1
		}
		programs := func() []shim.Program {
			var ps []shim.Program
			if so.Programs != nil {
				ps = so.Programs()
			}
			return append(slices.Clone(ps), shim.Program{Argv: so.Argv})
		}
		m.launcher = shim.NewLauncherFunc(programs, so.Env, m.opts.RunDir, max(spare, 0))
		// Before any session of this daemon starts an agent (the boot's
		// reattached ones start none).
		m.host.Launcher = m.launcher
	}
	if m.leases.clustered() {
		// An append the store refused because another node holds the
		// session's lease: this node lets go of it.
		m.log.OnRefused(func(id string, err error) {
			if berth.IsCode(err, berth.ELeaseLost) {
				m.leases.lost(id)
			}
		})
	}
	m.changes.startPublishing()
	m.recovery.resumeQueued(resume)
	m.supervisor.start()
	m.recovery.start(ctx, attach, runEntries)
	return nil
}

// Booted is closed once every session the previous daemon left live is
// reattached, or closed for good.
func (m *Manager) Booted() <-chan struct{} { return m.recovery.booted }

// Close stops every live session with daemon_shutdown and waits for them.
// Nothing starts after Close begins.
func (m *Manager) Close(ctx context.Context) error { return m.Shutdown(ctx, true) }

// Shutdown ends the manager. With stopSessions it is Close; without, the
// agents that run in shims are left running, their sessions active, for
// the next daemon to reattach (the others are stopped). Nothing starts
// after Shutdown begins.
func (m *Manager) Shutdown(ctx context.Context, stopSessions bool) error {
	m.set.close()
	// A boot still reattaching stops where it is: the sessions it did not
	// reach stay active with their shims, for the next daemon.
	if m.recovery.cancel != nil {
		m.recovery.cancel()
	}
	if err := waitGroup(ctx, &m.recovery.running); err != nil {
		return err
	}
	if err := m.probes.Close(ctx); err != nil {
		return fmt.Errorf("session manager close: %w", err)
	}
	m.supervisor.stop()
	if err := waitGroup(ctx, &m.supervisor.running); err != nil {
		return err
	}
	// The tools calls end first: a wait_child or prompt_child in progress
	// must not hold the shutdown.
	if err := m.tools.close(ctx); err != nil {
		return err
	}
	// So do the model calls on the sandboxes' gateway sockets.
	if err := m.models.close(ctx); err != nil {
		return err
	}
	if err := m.net.close(ctx); err != nil {
		return err
	}
	// Creates under way finish first, so the sessions they start are stopped too.
	if err := waitGroup(ctx, &m.inflight); err != nil {
		return err
	}
	rts := m.set.all()

	var wg sync.WaitGroup
	for _, ls := range rts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if stopSessions {
				ls.Stop(context.WithoutCancel(ctx), berth.StopDaemonShutdown, nil)
				return
			}
			ls.Detach(context.WithoutCancel(ctx))
		}()
	}
	wg.Wait()
	if err := waitGroup(ctx, &m.monitors); err != nil {
		return err
	}
	if err := waitGroup(ctx, &m.leases.losing); err != nil {
		return err
	}
	m.sweeper.passes.Wait()
	m.changes.stopPublishing()
	if m.opts.Checkpoints != nil {
		// The sessions' warm checkpoints are closed: their watch goes.
		m.opts.Checkpoints.Close()
	}
	if m.launcher != nil {
		m.launcher.Close()
		if stopSessions {
			// Every session stopped: their shims exit, and are reaped here.
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := m.launcher.WaitChildren(wctx); err != nil {
				m.logger.Warn("shims still running after every session stopped", "err", err)
			}
		}
	}
	return nil
}

// waitGroup waits for wg or for ctx to end.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	if err := syncx.Wait(ctx, wg); err != nil {
		return fmt.Errorf("session manager close: %w", err)
	}
	return nil
}

// Health implements berth.SessionService.
func (m *Manager) Health(ctx context.Context) (*berth.Health, error) {
	h := berth.Health{Status: "ok", Version: m.opts.Version, Store: m.store.Name(), NodeID: m.opts.NodeID,
		Reattaching: m.set.reattaching()}
	// Liveness answers at once: a provider still being probed is
	// listed as such, not waited for.
	for name := range m.providers {
		switch done, err := m.probes.Answered(name); {
		case !done:
			h.Probing = append(h.Probing, name)
		case err == nil:
			h.Sandboxes = append(h.Sandboxes, name)
		}
	}
	sort.Strings(h.Sandboxes)
	sort.Strings(h.Probing)
	if l, ok := m.opts.Storage.(storageLag); ok {
		lag, last := l.Lag()
		h.Storage = &berth.StorageHealth{LagSeconds: lag.Seconds(), Error: last}
	}
	return &h, nil
}

// storageLag is a Storage that says how far behind it is.
type storageLag interface {
	Lag() (time.Duration, string)
}

// Agents implements berth.SessionService: the catalog, each agent that
// calls a model API with the credential its default upstream needs and
// whether it is set (modelgate.go's credentialsOf).
func (m *Manager) Agents(ctx context.Context) ([]berth.AgentInfo, error) {
	agents := m.opts.Catalog.List()
	m.models.credentialsOf(ctx, agents)
	return agents, nil
}

// agentInstaller is a catalog that fetches an npx agent's package ahead
// (config.Catalog).
type agentInstaller interface {
	Install(ctx context.Context, name string) (berth.AgentInfo, error)
}

// InstallAgent fetches the package of the npx agent name into the
// daemon's prefix, so that its sessions start without a download
// (docs/agents.md, Installing an agent ahead). EInvalid when the catalog
// cannot install agents.
func (m *Manager) InstallAgent(ctx context.Context, name string) (berth.AgentInfo, error) {
	in, ok := m.opts.Catalog.(agentInstaller)
	if !ok {
		return berth.AgentInfo{}, berth.Errorf(berth.EInvalid, "this daemon's catalog cannot install agents")
	}
	return in.Install(ctx, name)
}

// LiveIDs returns the ids of the sessions live here.
func (m *Manager) LiveIDs() map[string]bool { return m.set.ids() }

func (pl *placement) workspacesDir() string { return filepath.Join(pl.m.opts.Home, "workspaces") }
func (pl *placement) sessionsDir() string   { return filepath.Join(pl.m.opts.Home, "sessions") }

// sessionDir is where a session's private state (agent HOME) lives.
func (pl *placement) sessionDir(id string) string { return filepath.Join(pl.sessionsDir(), id) }

// isNotFound reports whether err is a berth not_found error.
func isNotFound(err error) bool { return berth.IsCode(err, berth.ENotFound) }

// errStopped is returned to callers that need a live agent.
var errStopped = errors.New("session is not active")

// capsOf is what the provider named name can do; nothing for one this
// daemon does not have.
func (pl *placement) capsOf(name string) berth.SandboxCapabilities {
	if p := pl.m.providers[name]; p != nil {
		return p.Capabilities()
	}
	return berth.SandboxCapabilities{}
}

// autoProvider is the first provider, in berth.SandboxProviders' order,
// that works here and that want picks, or nil.
func (pl *placement) autoProvider(want func(berth.SandboxCapabilities) bool) berth.SandboxProvider {
	for _, name := range berth.SandboxProviders {
		if p := pl.m.providers[name]; p != nil && pl.m.availability(name) == nil && want(p.Capabilities()) {
			return p
		}
	}
	return nil
}

// Limits bound what sessions may do (the daemon's [limits]).
type Limits = live.Limits

// Observer is told what the manager and its sessions do, for metrics.
type Observer = live.Observer

// ShimOptions say how agents are started in shims.
type ShimOptions = live.ShimOptions

// availability is the probe's answer for the provider named name (nil:
// it works here), once the probes are done.
func (m *Manager) availability(name string) error { return m.probes.Err(name) }
