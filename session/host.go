package session

import (
	"context"
	"sync"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// prepareStart is the manager's side of Host.prepare.
func (m *Manager) prepareStart(s *berth.Session, spec berth.AgentSpec, provider berth.SandboxProvider) live.AgentStart {
	// The berth tools are served before the sandbox opens: it binds their directory.
	var st live.AgentStart
	if grant, warning := m.grantTools(s, provider); grant != nil {
		srv := m.toolsMCPServer(grant)
		st.Tools = &srv
	} else {
		st.ToolsWarning = warning
	}
	st.Box, st.Program = m.sandboxConfig(s, spec), m.agentProgram(s, spec).path
	return st
}

// newLiveHost is the manager's side of the seam.
func (m *Manager) newLiveHost() *live.Host {
	return &live.Host{
		Store: m.store, Log: m.log, Checkpoints: m.opts.Checkpoints, Shim: m.opts.Shim, RunDir: m.opts.RunDir,
		Limits: m.opts.Limits, Observer: m.opts.Observer, Version: m.opts.Version, NodeID: m.opts.NodeID,
		InCluster: m.inCluster(), Hidden: m.hidden(), Publish: m.changes.feed.Publish, ShimToken: m.shimToken,
		Monitors:  &m.monitors,
		LeaseLost: m.leaseLost, Forget: m.forget, Sweep: m.sweep, ReleaseLease: m.releaseLease, RevokeTools: m.revokeTools,
		Prepare: m.prepareStart, CopyHomeFiles: m.copyHomeFiles,
		TranscriptPreamble: m.transcriptPreamble, LastTurnText: m.lastTurnText,
		Tree: managerTree{m}, TurnCheckpoints: m.turnCheckpoints, ToLive: m.toLive,
		CancelStoredElicitation: m.cancelStoredElicitation,
	}
}

// managerTree is the manager's side of Tree.
type managerTree struct{ m *Manager }

func (t managerTree) StopChildren(ctx context.Context, id string) {
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
			c.Stop(ctx, berth.StopParentStopped, nil)
		}()
	}
	wg.Wait()
}

func (t managerTree) ParentLive(id string) bool { return t.m.liveOf(id) != nil }

func (t managerTree) ToParent(parentID, typ string, data map[string]any) {
	t.m.toParent(parentID, typ, data)
}
