package session

import (
	"strings"

	"github.com/berth-sh/berth"

	live "github.com/berth-sh/berth/session/live"
)

// prepareStart is the manager's side of Host.prepare.
func (pl *placement) prepareStart(s *berth.Session, spec berth.AgentSpec, provider berth.SandboxProvider) live.AgentStart {
	// The berth tools are served before the sandbox opens: it binds their directory.
	var st live.AgentStart
	if grant, warning := pl.m.tools.grant(s, provider); grant != nil {
		srv := pl.m.tools.mcpServer(grant)
		st.Tools, st.ServeTools = &srv, grant.serve
	} else {
		st.ToolsWarning = warning
	}
	// What could not be granted is said in the session's log; the agent
	// then reaches nothing there (its directory is bound all the same).
	var warnings []string
	for _, w := range []string{st.ToolsWarning, pl.m.models.grant(s, spec, provider), pl.m.net.grant(s, provider)} {
		if w != "" {
			warnings = append(warnings, w)
		}
	}
	st.ToolsWarning = strings.Join(warnings, "; ")
	st.Box, st.Program = pl.sandboxConfig(s, spec), pl.agentProgram(s, spec).Path
	if path, args, ok := pl.m.models.wrap(s, spec, st.Program); ok {
		st.Program, st.Args = path, args
	}
	st.Beside = pl.m.net.beside(s, provider)
	return st
}

// revokeGrants ends what session id's agent was granted when it stopped
// (or was abandoned): its berth tools (the directory with removeDir) and
// its model gateway key.
func (m *Manager) revokeGrants(id string, removeDir bool) {
	m.tools.revoke(id, removeDir)
	m.models.revoke(id, removeDir)
	m.net.revoke(id, removeDir)
}

// turnEnded tells the Storage, if any, that a turn of session id ended.
func (m *Manager) turnEnded(id, turnID string) {
	if m.opts.Storage != nil {
		m.opts.Storage.TurnEnded(id, turnID)
	}
}

// newLiveHost is the manager's side of the seam.
func (m *Manager) newLiveHost() *live.Host {
	return &live.Host{
		Store: m.store, Log: m.log, Checkpoints: m.opts.Checkpoints, Shim: m.opts.Shim, RunDir: m.opts.RunDir,
		Limits: m.opts.Limits, Observer: m.opts.Observer, Version: m.opts.Version, NodeID: m.opts.NodeID,
		InCluster: m.leases.clustered(), Hidden: m.place.hidden(), Publish: m.changes.feed.Publish, ShimToken: m.shimToken,
		Changed:  m.supervisor.wake,
		Monitors: &m.monitors, Hush: m.hush,
		LeaseLost: m.leases.lost, Forget: m.set.forget, Sweep: m.leases.sweep, ReleaseLease: m.leases.release, RevokeTools: m.revokeGrants,
		Prepare: m.place.prepareStart, CopyHomeFiles: m.place.copyHomeFiles,
		TranscriptPreamble: m.transcripts.transcriptPreamble, LastTurnText: m.transcripts.lastTurnText,
		Tree: &m.trees, TurnCheckpoints: m.set.turnCheckpoints, ToLive: m.trees.toLive,
		CancelStoredElicitation: m.recovery.cancelStoredElicitation,
		TurnEnded:               m.turnEnded,
	}
}
