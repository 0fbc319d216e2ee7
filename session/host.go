package session

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
	"github.com/berth-sh/berth/checkpoint"
	"github.com/berth-sh/berth/eventlog"
	"github.com/berth-sh/berth/shim"
)

// liveHost is what a live session needs from whoever owns the set of
// sessions (the Manager): the seam between the two.
//
// Its leaves (the store, the log, the checkpoints, the shim launcher, the
// change feed and the values) take no lock of a live session and call
// back into nothing: a session uses them with its own lock held, which is
// how its events and records stay ordered against its turn boundaries.
// Its callbacks are the manager's: a session calls them with no lock of
// its own held.
type liveHost struct {
	store       berth.Store
	log         *eventlog.Log
	checkpoints *checkpoint.Store
	// launcher starts agents in shims (nil: as the daemon's own children).
	launcher *shim.Launcher
	shimOpts *ShimOptions
	runDir   string
	limits   Limits
	observer Observer
	version  string
	nodeID   string
	// inCluster says the store is shared with other nodes.
	inCluster bool
	// hidden are the daemon's own paths no agent may see.
	hidden []string
	// publish puts a changed session on the all-sessions stream.
	publish func(typ string, data json.RawMessage) string
	// shimToken signs the reports of a session's shim (see shim.Report).
	shimToken func(id, socket string) string
	// monitors counts the sessions' monitors, for the manager to wait.
	monitors *sync.WaitGroup

	// The callbacks.

	// leaseLost lets go of a session another node took over.
	leaseLost func(id string)
	// forget drops a session that stopped from the set; sweep removes what
	// its shims left; releaseLease gives up its lease; revokeTools ends its
	// berth tools credential.
	forget       func(rt *runtime)
	sweep        func(id string)
	releaseLease func(ctx context.Context, id string)
	revokeTools  func(id string, removeDir bool)
	// prepare makes what an agent start needs from the manager: the berth
	// tools grant (nil for none), the sandbox and the program (start.go).
	prepare       func(rt *runtime, s *berth.Session, provider berth.SandboxProvider) (*toolsGrant, berth.SandboxConfig, string)
	copyHomeFiles func(files []string, home string) error
	toolsServer   func(g *toolsGrant) acp.McpServer
	// transcriptPreamble and lastTurnText read the session's log.
	transcriptPreamble func(ctx context.Context, id string) (string, error)
	lastTurnText       func(ctx context.Context, id string) (string, string, error)
	// tree is the session's tree of sessions (children.go).
	tree liveTree
	// turnCheckpoints names the checkpoints a prune of tree keeps.
	turnCheckpoints func(tree string) map[string]bool
	// toLive logs an event in another live session, reporting whether it
	// took it.
	toLive func(id, typ string, data map[string]any) bool
	// cancelStoredElicitation ends an elicitation a previous daemon stored.
	cancelStoredElicitation func(ctx context.Context, e *berth.Elicitation)
}

// liveTree is a live session's view of its tree of sessions.
type liveTree interface {
	// stopChildren stops parent id's live children (parent_stopped) and
	// waits for them; nothing while the manager shuts down.
	stopChildren(ctx context.Context, id string)
	// parentLive reports whether session id is live here.
	parentLive(id string) bool
	// toParent logs an event about a child in its live parent's log.
	toParent(parentID, typ string, data map[string]any)
}

// newLiveHost is the manager's side of the seam.
func (m *Manager) newLiveHost() *liveHost {
	return &liveHost{
		store: m.store, log: m.log, checkpoints: m.opts.Checkpoints, shimOpts: m.opts.Shim, runDir: m.opts.RunDir,
		limits: m.opts.Limits, observer: m.opts.Observer, version: m.opts.Version, nodeID: m.opts.NodeID,
		inCluster: m.inCluster(), hidden: m.hidden(), publish: m.changes.feed.Publish, shimToken: m.shimToken,
		monitors:  &m.monitors,
		leaseLost: m.leaseLost, forget: m.forget, sweep: m.sweep, releaseLease: m.releaseLease, revokeTools: m.revokeTools,
		prepare: func(rt *runtime, s *berth.Session, provider berth.SandboxProvider) (*toolsGrant, berth.SandboxConfig, string) {
			// The berth tools are served before the sandbox opens: it binds their directory.
			grant := m.grantTools(rt, s, provider)
			return grant, m.sandboxConfig(s, rt.spec), m.agentProgram(s, rt.spec).path
		},
		copyHomeFiles: m.copyHomeFiles, toolsServer: m.toolsMCPServer,
		transcriptPreamble: m.transcriptPreamble, lastTurnText: m.lastTurnText,
		tree: managerTree{m}, turnCheckpoints: m.turnCheckpoints, toLive: m.toLive,
		cancelStoredElicitation: m.cancelStoredElicitation,
	}
}

// managerTree is the manager's side of liveTree.
type managerTree struct{ m *Manager }

func (t managerTree) stopChildren(ctx context.Context, id string) {
	m := t.m
	m.mu.Lock()
	closing := m.closing
	m.mu.Unlock()
	if closing {
		return
	}
	var wg sync.WaitGroup
	for _, c := range m.liveChildren(id) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop(ctx, berth.StopParentStopped, nil)
		}()
	}
	wg.Wait()
}

func (t managerTree) parentLive(id string) bool { return t.m.runtimeOf(id) != nil }

func (t managerTree) toParent(parentID, typ string, data map[string]any) {
	t.m.toParent(parentID, typ, data)
}
