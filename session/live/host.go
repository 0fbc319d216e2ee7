package live

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

// Host is what a live session needs from whoever owns the set of
// sessions (the Manager): the seam between the two. Its fields are of two
// kinds, and lockorder_test.go holds every path of the package to the
// rule of each.
//
// The leaves, first, call back into no live session and take no lock the
// manager takes around a live session's methods: a session uses them
// holding its own locks, which is how its events and records stay
// ordered against its turn boundaries. The store and the checkpoints do
// their own I/O; the log's Append waits only for its writer, which takes
// no session's lock (its OnRefused is the manager's, called on the
// writer's goroutine); the change feed (Publish) takes its own lock alone;
// ShimToken is an HMAC; an Observer returns at once; Monitors is a
// WaitGroup.
//
// The callbacks, after them, are the manager's own code: it may take its
// locks and call into this session or another. A session calls them
// holding no lock of its own (see Session's lock order); what it must
// tell while it holds one (a lease lost, at a store write) waits until
// it has released them all.
type Host struct {
	Store       berth.Store
	Log         *eventlog.Log
	Checkpoints *checkpoint.Store
	// Launcher starts agents in shims (nil: as the daemon's own children).
	Launcher *shim.Launcher
	Shim     *ShimOptions
	RunDir   string
	Limits   Limits
	Observer Observer
	Version  string
	NodeID   string
	// InCluster says the store is shared with other nodes.
	InCluster bool
	// Hidden are the daemon's own paths no agent may see.
	Hidden []string
	// Publish puts a changed session on the all-sessions stream.
	Publish func(typ string, data json.RawMessage) string
	// Changed, if set, is told of each session whose view changed (a
	// turn, a question or a prompt queued, its state), under the
	// session's lock: the supervisor's cue to look at it. It must not
	// block.
	Changed func(ls *Session)
	// ShimToken signs the reports of a session's shim (see shim.Report).
	ShimToken func(id, socket string) string
	// Monitors counts the sessions' monitors, for the manager to wait.
	Monitors *sync.WaitGroup
	// Hush holds the sessions' background checkpoint work back while a
	// turn of any of them waits for its agent's first words (nil: never).
	Hush *Hush

	// Callbacks: called holding no lock of the live session.

	// LeaseLost lets go of a session another node took over.
	LeaseLost func(id string)
	// TurnEnded, when set, is told each turn's end once its turn_ended is
	// handed to the log; it must return at once.
	TurnEnded func(id, turnID string)
	// Forget drops a session that stopped from the set; Sweep removes what
	// its shims left; ReleaseLease gives up its lease; RevokeTools ends
	// what its agent's start was granted: its berth tools credential and
	// its model gateway key and socket.
	Forget       func(ls *Session)
	Sweep        func(id string)
	ReleaseLease func(ctx context.Context, id string)
	RevokeTools  func(id string, removeDir bool)
	// Prepare makes what the start of session s's agent needs from the
	// manager (start.go); it records the berth tools credential's hash in
	// s.ToolsHash.
	Prepare func(s *berth.Session, spec berth.AgentSpec, provider berth.SandboxProvider) AgentStart
	// CopyHomeFiles copies the user's files an agent is given into its
	// session's HOME at every start.
	CopyHomeFiles func(files []string, home string) error
	// TranscriptPreamble and LastTurnText read the session's log.
	TranscriptPreamble func(ctx context.Context, id string) (string, error)
	LastTurnText       func(ctx context.Context, id string) (string, string, error)
	// Tree is the session's tree of sessions (children.go).
	Tree Tree
	// TurnCheckpoints names the checkpoints a prune of tree keeps.
	TurnCheckpoints func(tree string) map[string]bool
	// ToLive logs an event in another live session, reporting whether it
	// took it.
	ToLive func(id, typ string, data map[string]any) bool
	// CancelStoredElicitation ends an elicitation a previous daemon stored.
	//
	// Deprecated: not called any more. A live session records the stale
	// elicitations of a turn it ends itself, holding recordMu like their
	// events; the manager need not set it.
	CancelStoredElicitation func(ctx context.Context, e *berth.Elicitation)
}

// Tree is a live session's view of its tree of sessions.
type Tree interface {
	// StopChildren, called once session id is closing, stops its live
	// children (parent_stopped) and waits for them; nothing while the
	// manager shuts down.
	StopChildren(ctx context.Context, id string)
	// ParentLive reports whether session id is live here.
	ParentLive(id string) bool
	// ToParent logs an event about a child in its live parent's log.
	ToParent(parentID, typ string, data map[string]any)
}

// AgentStart is what the manager makes for an agent's start.
type AgentStart struct {
	// Tools is the berth entry of the agent's MCP servers (nil for none);
	// toolsWarning says why it has none when it should.
	Tools        *acp.McpServer
	ToolsWarning string
	// ServeTools serves Tools' socket, called once the agent is on its
	// way; it returns why the agent has no tools after all ("" when it
	// has them). Nil when Tools is.
	ServeTools func() (warning string)
	// Box is the agent's sandbox, program the path its command starts
	// from in it.
	Box     berth.SandboxConfig
	Program string
	// Args are the arguments the program starts with (nil: the agent
	// spec's): the agent's own after those of a program that runs it.
	Args []string
	// Beside is the program and arguments a command run beside the agent
	// (exec, the agent's terminals) runs under, before its own, to have
	// the agent's way out in a sandbox of its own; nil for none.
	Beside []string
}
