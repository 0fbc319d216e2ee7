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
	// prepare makes what the start of session s's agent needs from the
	// manager (start.go); it records the berth tools credential's hash in
	// s.ToolsHash.
	prepare func(s *berth.Session, spec berth.AgentSpec, provider berth.SandboxProvider) agentStart
	// copyHomeFiles copies the user's files an agent is given into its
	// session's HOME at every start.
	copyHomeFiles func(files []string, home string) error
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
	// stopChildren, called once session id is closing, stops its live
	// children (parent_stopped) and waits for them; nothing while the
	// manager shuts down.
	stopChildren(ctx context.Context, id string)
	// parentLive reports whether session id is live here.
	parentLive(id string) bool
	// toParent logs an event about a child in its live parent's log.
	toParent(parentID, typ string, data map[string]any)
}

// agentStart is what the manager makes for an agent's start.
type agentStart struct {
	// tools is the berth entry of the agent's MCP servers (nil for none);
	// toolsWarning says why it has none when it should.
	tools        *acp.McpServer
	toolsWarning string
	// box is the agent's sandbox, program the path its command starts
	// from in it.
	box     berth.SandboxConfig
	program string
}

// prepareStart is the manager's side of liveHost.prepare.
func (m *Manager) prepareStart(s *berth.Session, spec berth.AgentSpec, provider berth.SandboxProvider) agentStart {
	// The berth tools are served before the sandbox opens: it binds their directory.
	var st agentStart
	if grant, warning := m.grantTools(s, provider); grant != nil {
		srv := m.toolsMCPServer(grant)
		st.tools = &srv
	} else {
		st.toolsWarning = warning
	}
	st.box, st.program = m.sandboxConfig(s, spec), m.agentProgram(s, spec).path
	return st
}

// newLiveHost is the manager's side of the seam.
func (m *Manager) newLiveHost() *liveHost {
	return &liveHost{
		store: m.store, log: m.log, checkpoints: m.opts.Checkpoints, shimOpts: m.opts.Shim, runDir: m.opts.RunDir,
		limits: m.opts.Limits, observer: m.opts.Observer, version: m.opts.Version, nodeID: m.opts.NodeID,
		inCluster: m.inCluster(), hidden: m.hidden(), publish: m.changes.feed.Publish, shimToken: m.shimToken,
		monitors:  &m.monitors,
		leaseLost: m.leaseLost, forget: m.forget, sweep: m.sweep, releaseLease: m.releaseLease, revokeTools: m.revokeTools,
		prepare: m.prepareStart, copyHomeFiles: m.copyHomeFiles,
		transcriptPreamble: m.transcriptPreamble, lastTurnText: m.lastTurnText,
		tree: managerTree{m}, turnCheckpoints: m.turnCheckpoints, toLive: m.toLive,
		cancelStoredElicitation: m.cancelStoredElicitation,
	}
}

// managerTree is the manager's side of liveTree.
type managerTree struct{ m *Manager }

func (t managerTree) stopChildren(ctx context.Context, id string) {
	m := t.m
	// The parent is closing: a child being admitted is live once this
	// lock is ours, and no other is admitted after.
	m.trees.lock(id, true)()
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
