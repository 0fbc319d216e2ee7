// Package session is berth's session manager: it owns every live agent, the
// state machine of each session, turns, the policy answers to permission
// requests, and the fs and terminal services an agent calls back into. It
// implements berth.SessionService.
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
	"github.com/berth-sh/berth/internal/syncx"
	"github.com/berth-sh/berth/shim"
	"github.com/berth-sh/berth/snapshot"

	live "github.com/berth-sh/berth/session/live"
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
	// Network is the network setting of sessions that do not ask for it.
	Network bool
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
	Sandbox   SandboxPolicy
	Limits    live.Limits
	// Home is $BERTH_HOME: managed workspaces and per-session state live
	// under it.
	Home    string
	NodeID  string
	Version string
	// Snapshots keeps workspace archives ($BERTH_HOME/snapshots); nil
	// disables snapshots.
	Snapshots *snapshot.Store
	// Checkpoints keeps the workspace before every turn
	// ($BERTH_HOME/checkpoints, CONTRACT §4.8); nil turns them off.
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
	// Observer is told of creates, turns, permission decisions and agent
	// exits (metrics); nil tells no one.
	Observer live.Observer
	// Cluster, when set, makes the manager a node of a cluster: sessions
	// are driven under their lease (see Cluster); nil is one node.
	Cluster Cluster
	Logger  *slog.Logger
}

// Manager owns the live sessions.
type Manager struct {
	opts Options
	// host is the manager's side of the seam to its live sessions.
	host *live.Host
	// shimKey makes the tokens that sign the shims' reports (shimToken).
	shimKey   []byte
	store     berth.Store
	log       *eventlog.Log
	logger    *slog.Logger
	providers map[string]berth.SandboxProvider
	available map[string]error // probe result per provider

	mu       sync.Mutex
	live     map[string]*live.Session
	reserved int // slots taken by creates not yet registered
	// booting holds, for each session found live at boot whose reattach
	// is not over, a channel closed when it is (see boot.go).
	booting  map[string]chan struct{}
	closing  bool
	inflight sync.WaitGroup // API calls that may start a session
	// supervisor counts the supervisor goroutine and the stops it started;
	// stopSupervisor ends it.
	supervisor     sync.WaitGroup
	stopSupervisor context.CancelFunc
	monitors       sync.WaitGroup // one monitor goroutine per started agent
	// launcher starts shims (nil without Options.Shim).
	launcher *shim.Launcher
	sweeper  sweeper
	// sessions serialise a delete against resumes and snapshots of the
	// same session (see sessionlock.go for the lock order).
	sessions sessionLocks
	// trees serialise the admission of a parent's children against each
	// other and against the parent's stop, keyed by the parent's id (see
	// treeState).
	trees sessionLocks
	// changes is the all-sessions stream's publisher.
	changes *changes
	// booted is closed once every session found live at boot is
	// reattached or closed, and the boot's clean-up is done; boot counts
	// the goroutine that does it, stopBoot cancels it.
	booted   chan struct{}
	boot     sync.WaitGroup
	stopBoot context.CancelFunc
	// tools serves the live sessions' berth tools sockets.
	tools toolGate
	// losing counts the live sessions being let go after a lost lease
	// (leaseLost).
	losing sync.WaitGroup
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
		available: make(map[string]error),
		live:      make(map[string]*live.Session),
		booting:   make(map[string]chan struct{}),
		changes:   newChanges(opts.Changes),
		booted:    make(chan struct{}),
	}
	for _, p := range opts.Providers {
		m.providers[p.Name()] = p
	}
	m.host = m.newLiveHost()
	return m
}

// Open probes the sandbox providers once and reconciles sessions a previous
// daemon left live.
func (m *Manager) Open(ctx context.Context) error {
	for name, p := range m.providers {
		m.available[name] = p.Probe(ctx)
	}
	for _, dir := range []string{m.workspacesDir(), m.sessionsDir()} {
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
	bundles, strays := shim.ScanRunDir(m.opts.RunDir)
	attach, rec, resume, err := m.reconcile(ctx)
	if err != nil {
		return err
	}
	// A parent stopped while the daemon was down takes its children along.
	m.stopOrphans(ctx)
	// The tools sockets of sessions that stopped while no daemon ran go;
	// those of sessions the boot reattaches stay (their sandboxes have the
	// directory bound), to be served again.
	keep := make(map[string]bool, len(attach))
	for _, s := range attach {
		keep[s.ID] = true
	}
	m.removeStaleTools(keep)
	if so := m.opts.Shim; so != nil {
		spare := so.Spare
		if spare == 0 {
			spare = 1
		}
		programs := append(slices.Clone(so.Programs), shim.Program{Argv: so.Argv})
		m.launcher = shim.NewLauncher(programs, so.Env, m.opts.RunDir, max(spare, 0))
		// Before any session of this daemon starts an agent (the boot's
		// reattached ones start none).
		m.host.Launcher = m.launcher
	}
	if m.inCluster() {
		// An append the store refused because another node holds the
		// session's lease: this node lets go of it.
		m.log.OnRefused(func(id string, err error) {
			if berth.IsCode(err, berth.ELeaseLost) {
				m.leaseLost(id)
			}
		})
	}
	m.startActivity()
	m.resumeQueued(resume)
	m.startSupervisor()
	m.startBoot(ctx, attach, rec, runDirLeft{bundles, strays})
	return nil
}

// Booted is closed once every session the previous daemon left live is
// reattached, or closed for good.
func (m *Manager) Booted() <-chan struct{} { return m.booted }

// Close stops every live session with daemon_shutdown and waits for them.
// Nothing starts after Close begins.
func (m *Manager) Close(ctx context.Context) error { return m.Shutdown(ctx, true) }

// Shutdown ends the manager. With stopSessions it is Close; without, the
// agents that run in shims are left running, their sessions active, for
// the next daemon to reattach (the others are stopped). Nothing starts
// after Shutdown begins.
func (m *Manager) Shutdown(ctx context.Context, stopSessions bool) error {
	m.mu.Lock()
	m.closing = true
	m.mu.Unlock()
	// A boot still reattaching stops where it is: the sessions it did not
	// reach stay active with their shims, for the next daemon.
	if m.stopBoot != nil {
		m.stopBoot()
	}
	if err := waitGroup(ctx, &m.boot); err != nil {
		return err
	}
	if m.stopSupervisor != nil {
		m.stopSupervisor()
	}
	if err := waitGroup(ctx, &m.supervisor); err != nil {
		return err
	}
	// The tools calls end first: a wait_child or prompt_child in progress
	// must not hold the shutdown.
	if err := m.closeTools(ctx); err != nil {
		return err
	}
	// Creates under way finish first, so the sessions they start are stopped too.
	if err := waitGroup(ctx, &m.inflight); err != nil {
		return err
	}
	rts := m.liveSessions()

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
	if err := waitGroup(ctx, &m.losing); err != nil {
		return err
	}
	m.sweeper.passes.Wait()
	m.stopActivity()
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

// enter registers an API call that may start agents; it fails once Close
// has begun.
func (m *Manager) enter() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return berth.Errorf(berth.EUnavailable, "the daemon is shutting down")
	}
	m.inflight.Add(1)
	return nil
}

// Health implements berth.SessionService.
func (m *Manager) Health(ctx context.Context) (*berth.Health, error) {
	h := berth.Health{Status: "ok", Version: m.opts.Version, Store: m.store.Name(), NodeID: m.opts.NodeID,
		Reattaching: m.reattaching()}
	for name, err := range m.available {
		if err == nil {
			h.Sandboxes = append(h.Sandboxes, name)
		}
	}
	sort.Strings(h.Sandboxes)
	return &h, nil
}

// Agents implements berth.SessionService.
func (m *Manager) Agents(ctx context.Context) ([]berth.AgentInfo, error) {
	return m.opts.Catalog.List(), nil
}

// liveSessions returns the live liveSessions as they are now.
func (m *Manager) liveSessions() []*live.Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	rts := make([]*live.Session, 0, len(m.live))
	for _, ls := range m.live {
		rts = append(rts, ls)
	}
	return rts
}

// LiveIDs returns the ids of the sessions live here.
func (m *Manager) LiveIDs() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]bool, len(m.live))
	for id := range m.live {
		out[id] = true
	}
	return out
}

// liveOf returns the live session of a session, or nil.
func (m *Manager) liveOf(id string) *live.Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// forget drops a live session once its session is stopped.
func (m *Manager) forget(ls *live.Session) {
	m.mu.Lock()
	if m.live[ls.ID()] == ls {
		delete(m.live, ls.ID())
	}
	m.mu.Unlock()
}

func (m *Manager) workspacesDir() string { return filepath.Join(m.opts.Home, "workspaces") }
func (m *Manager) sessionsDir() string   { return filepath.Join(m.opts.Home, "sessions") }

// sessionDir is where a session's private state (agent HOME) lives.
func (m *Manager) sessionDir(id string) string { return filepath.Join(m.sessionsDir(), id) }

// isNotFound reports whether err is a berth not_found error.
func isNotFound(err error) bool { return berth.IsCode(err, berth.ENotFound) }

// errStopped is returned to callers that need a live agent.
var errStopped = errors.New("session is not active")

// capsOf is what the provider named name can do; nothing for one this
// daemon does not have.
func (m *Manager) capsOf(name string) berth.SandboxCapabilities {
	if p := m.providers[name]; p != nil {
		return p.Capabilities()
	}
	return berth.SandboxCapabilities{}
}

// autoProvider is the first provider, in berth.SandboxProviders' order,
// that works here and that want picks, or nil.
func (m *Manager) autoProvider(want func(berth.SandboxCapabilities) bool) berth.SandboxProvider {
	for _, name := range berth.SandboxProviders {
		if p := m.providers[name]; p != nil && m.available[name] == nil && want(p.Capabilities()) {
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
