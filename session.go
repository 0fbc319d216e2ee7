package berth

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// State is where a session is in its life (docs/api.md, "Sessions: states,
// badges, stop reasons").
type State string

// The session states. starting → active → stopping → stopped; stopped →
// starting only through resume.
const (
	StateStarting State = "starting"
	StateActive   State = "active"
	StateStopping State = "stopping"
	StateStopped  State = "stopped"
)

// validTransitions lists, for each state, the states it may move to.
var validTransitions = map[State][]State{
	StateStarting: {StateActive, StateStopping, StateStopped},
	StateActive:   {StateStopping, StateStopped},
	StateStopping: {StateStopped},
	StateStopped:  {StateStarting},
}

// CanTransition reports whether a session may move from one state to another.
func CanTransition(from, to State) bool {
	for _, s := range validTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Live reports whether a session in this state has (or is getting) an agent.
func (s State) Live() bool { return s == StateStarting || s == StateActive || s == StateStopping }

// Badge is the one-word, computed status shown to humans.
type Badge string

// The badges.
const (
	BadgeRunning   Badge = "running"
	BadgeIdle      Badge = "idle"
	BadgeWaiting   Badge = "waiting"
	BadgeHung      Badge = "hung"
	BadgeNeedsAuth Badge = "needs_auth"
	// BadgeOverBudget: the session's (tree's) spending reached one of its
	// budgets (docs/api.md, "Usage and budgets").
	BadgeOverBudget Badge = "over_budget"
	BadgeStopped    Badge = "stopped"
	BadgeFailed     Badge = "failed"
	BadgeStarting   Badge = "starting"
)

// StopReason says why a session stopped.
type StopReason string

// The stop reasons.
const (
	StopUserRequested  StopReason = "user_requested"
	StopIdleTimeout    StopReason = "idle_timeout"
	StopTTLExpired     StopReason = "ttl_expired"
	StopAgentExited    StopReason = "agent_exited"
	StopAgentCrashed   StopReason = "agent_crashed"
	StopStartupFailed  StopReason = "startup_failed"
	StopDaemonShutdown StopReason = "daemon_shutdown"
	StopDaemonCrashed  StopReason = "daemon_crashed"
	StopParentStopped  StopReason = "parent_stopped"
	StopStallTimeout   StopReason = "stall_timeout"
	StopNodeLost       StopReason = "node_lost"
)

// Failure kinds.
const (
	FailStartup     = "startup"
	FailHandshake   = "handshake"
	FailProtocol    = "protocol"
	FailProcessExit = "process_exit"
	FailTimeout     = "timeout"
	FailSandbox     = "sandbox"
	FailAuth        = "auth"
	FailInternal    = "internal"
)

// Failure describes why a session stopped with a failure.
type Failure struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// Permission modes (docs/api.md, "Permissions").
const (
	PermDenyAll      = "deny-all"
	PermApproveReads = "approve-reads"
	PermApproveAll   = "approve-all"
	PermAsk          = "ask"
)

// SandboxSpec is the sandbox a session runs under.
type SandboxSpec struct {
	Provider string `json:"provider"`
	// Network: the sandbox has the open network.
	Network bool `json:"network"`
	// NetworkPolicy is the allow list of a session created with one
	// (docs/api.md, Network policy), hosts allowed for the session added;
	// nil otherwise.
	NetworkPolicy *NetworkPolicy `json:"network_policy,omitempty"`
	// Limits are the limits the provider enforces on the session's
	// sandbox; absent (zero) where none is, and for a session created
	// before they were recorded.
	Limits SandboxLimitsInfo `json:"limits,omitzero"`
}

// SandboxLimitsInfo are a session's sandbox limits as the API shows them:
// a field is absent (0) where nothing is enforced.
type SandboxLimitsInfo struct {
	// MemoryMB bounds the memory of the agent and everything it starts,
	// swap and the private /tmp's files included, in MiB.
	MemoryMB int `json:"memory_mb,omitempty"`
	// TmpMB caps the size of the sandbox's private /tmp, in MiB.
	TmpMB int `json:"tmp_mb,omitempty"`
}

// ACPInfo is what the agent told berth during the ACP handshake.
type ACPInfo struct {
	SessionID       string          `json:"session_id"`
	ProtocolVersion int             `json:"protocol_version"`
	AgentInfo       json.RawMessage `json:"agent_info,omitempty"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	AuthMethods     json.RawMessage `json:"auth_methods,omitempty"`
	// Modes, Models, ConfigOptions and Commands are what the agent offers
	// (docs/api.md, "Agent controls"), kept current from its updates
	// (controls.go).
	Modes         *ACPModes         `json:"modes,omitempty"`
	Models        *ACPModels        `json:"models,omitempty"`
	ConfigOptions []ACPConfigOption `json:"config_options,omitempty"`
	Commands      []ACPCommand      `json:"commands,omitempty"`
}

// QueueInfo summarises a session's input queue.
type QueueInfo struct {
	Pending    int   `json:"pending"`
	Generation int64 `json:"generation"`
}

// Session is one agent conversation in one workspace, under one sandbox.
// Fields tagged json:"-" are stored but never shown over the API.
type Session struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Title is the agent's title for the conversation (session_info_update).
	Title              string            `json:"title,omitempty"`
	Agent              string            `json:"agent"`
	State              State             `json:"state"`
	Badge              Badge             `json:"badge"`
	StopReason         StopReason        `json:"stop_reason,omitempty"`
	Failure            *Failure          `json:"failure,omitempty"`
	Workspace          string            `json:"workspace"`
	ManagedWorkspace   bool              `json:"managed_workspace"`
	Sandbox            SandboxSpec       `json:"sandbox"`
	PermissionMode     string            `json:"permission_mode"`
	ACP                ACPInfo           `json:"acp"`
	ParentID           string            `json:"parent_id,omitempty"`
	Labels             map[string]string `json:"labels"`
	Env                map[string]string `json:"-"`
	CreatedAt          time.Time         `json:"created_at"`
	UpdatedAt          time.Time         `json:"updated_at"`
	LastActivityAt     time.Time         `json:"last_activity_at"`
	ExpiresAt          *time.Time        `json:"expires_at,omitempty"`
	TTLSeconds         int               `json:"ttl_seconds,omitempty"`
	IdleTimeoutSeconds int               `json:"idle_timeout_seconds,omitempty"`
	LastSeq            int64             `json:"last_seq"`
	Turns              int               `json:"turns"`
	CurrentTurnID      string            `json:"current_turn_id,omitempty"`
	Queue              QueueInfo         `json:"queue"`
	PendingPermissions int               `json:"pending_permissions"`
	// PendingElicitations counts the agent's elicitations that wait for an
	// answer (docs/api.md, "Elicitations").
	PendingElicitations int  `json:"pending_elicitations"`
	Resumable           bool `json:"resumable"`
	// AgentPID is the process group of the agent while it runs, recorded so
	// a daemon that finds the session live at boot can kill what is left.
	AgentPID int `json:"-"`
	// AgentOffset is the highest Event.Source committed for the session: how
	// far into the agent's stdout stream the daemon has durably processed.
	// Only AppendEvents moves it, like LastSeq; CreateSession and
	// UpdateSession ignore it.
	AgentOffset int64 `json:"-"`
	// ShimSocket is the Unix socket of the session's shim process while it
	// runs.
	ShimSocket string `json:"-"`
	// ShimPID is the pid of the session's shim process while it runs.
	ShimPID int `json:"-"`
	// NeedsAuth is set when the agent answered auth_required; the badge shows it.
	NeedsAuth bool `json:"-"`

	// ForkedFrom says which session and checkpoint this one was forked from
	// (docs/api.md, "Checkpoints, rewind and fork"); nil for one that was not.
	ForkedFrom *ForkRef `json:"forked_from,omitempty"`

	// RootID is the id of the session's tree's root: its own for a root.
	RootID string `json:"root_id"`
	// Depth is how far below its root the session is (a root is 0).
	Depth int `json:"depth"`
	// SpawnKey is the Idempotency-Key a child was spawned with ("" for
	// none), unique among the children of one parent; SpawnHash is the
	// digest of the spawn's body, so that a retry with another body is
	// told apart.
	SpawnKey  string `json:"-"`
	SpawnHash string `json:"-"`

	// MCPServers are the user's MCP servers given to the agent (docs/api.md,
	// "User MCP servers"), shown with their env and header values redacted.
	MCPServers MCPServers `json:"mcp_servers,omitempty"`
	// BerthTools says whether the agent is given the berth MCP server.
	BerthTools bool `json:"berth_tools"`
	// Worktree is the git worktree the workspace is, nil for none.
	Worktree *Worktree `json:"worktree,omitempty"`
	// Models are the upstreams the session's agent is pointed at, by kind
	// ({"anthropic": "my-upstream"}), where it does not call the upstream
	// named after its kind (docs/api.md, The model gateway).
	Models map[string]string `json:"models,omitempty"`
	// Auth says what the session's agent lacks to reach its model: nil
	// when nothing.
	Auth *SessionAuth `json:"auth,omitempty"`
	// Mounts are the names of the [[sandbox.mounts]] bound read-only in
	// the session's sandbox, re-bound at every resume.
	Mounts []string `json:"mounts,omitempty"`
	// Node is the id of the cluster node driving the session (the holder
	// of its lease), "" when none does: a stopped session, or one node
	// alone (docs/api.md, "Cluster nodes: ownership and failover").
	Node string `json:"node,omitempty"`
	// ToolsHash is the SHA-256 (hex) of the credential of the session's
	// berth MCP server while its agent runs, so that a restarted daemon
	// serves the agent's `berth mcp` again; "" when none.
	ToolsHash string `json:"-"`

	// Usage is what the session's model calls used, with its subtree's
	// in Usage.Tree (docs/api.md, "Usage and budgets"). Only
	// UsageStore.AddUsage moves it: CreateSession and UpdateSession
	// ignore it.
	Usage Usage `json:"usage"`
	// MaxCostUSD and MaxTokens are the session's budgets (nil: none):
	// its tree's spending at either refuses its and its descendants'
	// model calls.
	MaxCostUSD *float64 `json:"max_cost_usd,omitempty"`
	MaxTokens  *int64   `json:"max_tokens,omitempty"`
	// Storage is how far the object store has the session (docs/api.md,
	// "Session state in an object store"); nil until it has it. Only
	// SessionStore.SetStorageSynced moves it, and only GetSession reads
	// it: CreateSession, UpdateSession and ListSessions ignore it.
	Storage *StorageSync `json:"storage,omitempty"`
}

// StorageSync is how far the object store has a session: its state as of
// the turn whose turn_ended is event SyncedSeq, written at SyncedAt.
type StorageSync struct {
	SyncedSeq int64     `json:"synced_seq"`
	SyncedAt  time.Time `json:"synced_at"`
}

// overBudget reports whether the session's spending reached a budget.
func (s *Session) overBudget() bool {
	limit, _ := s.Exceeded()
	return limit != ""
}

// SessionAuth is what a session's agent lacks to reach its model
// (docs/api.md, The model gateway).
type SessionAuth struct {
	// Missing names the credential the model gateway needed and did not
	// have (`berth credentials set NAME`).
	Missing string `json:"missing,omitempty"`
}

// missing reports whether a credential is missing.
func (a *SessionAuth) missing() bool { return a != nil && a.Missing != "" }

// ComputeBadge derives the badge from the session's fields. busy and waiting
// are live facts the manager knows (a turn in flight, a pending permission).
// A field read here is kept by Tally in the states that read it, which
// the stores' CountSessions count by.
func (s *Session) ComputeBadge(busy, hung bool) Badge {
	switch s.State {
	case StateStopped:
		if s.Failure != nil || s.StopReason == StopAgentCrashed || s.StopReason == StopStartupFailed || s.StopReason == StopDaemonCrashed {
			return BadgeFailed
		}
		return BadgeStopped
	case StateStarting:
		if s.NeedsAuth || s.Auth.missing() {
			// The agent answered session/new with auth_required.
			return BadgeNeedsAuth
		}
		return BadgeStarting
	case StateStopping:
		return BadgeStopped
	}
	switch {
	case s.PendingPermissions > 0, s.PendingElicitations > 0:
		return BadgeWaiting
	case s.Auth.missing():
		// The model gateway refused a call: a credential is not set.
		return BadgeNeedsAuth
	case hung && busy:
		return BadgeHung
	case busy:
		return BadgeRunning
	case s.overBudget():
		return BadgeOverBudget
	case s.NeedsAuth:
		return BadgeNeedsAuth
	}
	return BadgeIdle
}

// Tally is what a census (metrics) counts a session by: its state, its
// agent and what its badge depends on in that state when no live session
// drives it (ComputeBadge(false, false)). Sessions of equal tallies have
// equal badges. A stopped session's tally holds its stop reason and
// whether it failed and nothing else; another's never those two, which
// its badge does not read. So a store reads two fields of each stopped
// session, the many of a long-lived home.
type Tally struct {
	State      State
	Agent      string
	StopReason StopReason
	// Failed: the session carries a Failure.
	Failed bool
	// Waiting: a permission or an elicitation waits for an answer.
	Waiting bool
	// AuthMissing: the model gateway missed a credential (Auth);
	// NeedsAuth: the agent answered auth_required.
	AuthMissing, NeedsAuth bool
	// OverBudget: its tree's spending reached one of its budgets.
	OverBudget bool
}

// SessionCount is how many sessions share a Tally.
type SessionCount struct {
	Tally
	Sessions int
}

// Tally reduces s to what a census counts it by.
func (s *Session) Tally() Tally {
	if s.State == StateStopped {
		return Tally{State: s.State, Agent: s.Agent, StopReason: s.StopReason, Failed: s.Failure != nil}
	}
	return Tally{State: s.State, Agent: s.Agent, Waiting: s.PendingPermissions > 0 || s.PendingElicitations > 0,
		AuthMissing: s.Auth.missing(), NeedsAuth: s.NeedsAuth, OverBudget: s.overBudget()}
}

// Badge is the badge of every session of this tally that no live session
// drives: ComputeBadge(false, false) of a session made of it.
func (t Tally) Badge() Badge {
	s := Session{State: t.State, StopReason: t.StopReason, NeedsAuth: t.NeedsAuth}
	if t.Failed {
		s.Failure = &Failure{}
	}
	if t.Waiting {
		s.PendingPermissions = 1
	}
	if t.AuthMissing {
		s.Auth = &SessionAuth{Missing: "credential"}
	}
	if t.OverBudget {
		// A budget of no tokens is reached from the start.
		s.MaxTokens = new(int64(0))
	}
	return s.ComputeBadge(false, false)
}

// SessionFilter selects sessions in a list.
type SessionFilter struct {
	State  State
	Agent  string
	Parent string
	Labels map[string]string
	// Root selects a whole tree: its root and every descendant.
	Root string
	// SpawnKey, with Parent, selects the child spawned with this
	// Idempotency-Key.
	SpawnKey string
	// Cursor is an opaque position returned as NextCursor by a previous page.
	Cursor string
	Limit  int
}

// SessionPage is one page of a session list.
type SessionPage struct {
	Sessions   []*Session `json:"sessions"`
	NextCursor string     `json:"next_cursor"`
}

// CreateRequest is the body of POST /v1/sessions (docs/api.md, "The create
// body").
type CreateRequest struct {
	Agent     string `json:"agent"`
	Name      string `json:"name,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Sandbox   string `json:"sandbox,omitempty"`
	// Network is false, true or an allow list (docs/api.md, Network
	// policy).
	Network            NetworkPolicy     `json:"network,omitzero"`
	PermissionMode     string            `json:"permission_mode,omitempty"`
	Env                map[string]string `json:"env,omitempty"`
	Labels             map[string]string `json:"labels,omitempty"`
	TTLSeconds         int               `json:"ttl_seconds,omitempty"`
	IdleTimeoutSeconds int               `json:"idle_timeout_seconds,omitempty"`
	FromSnapshot       string            `json:"from_snapshot,omitempty"`
	Prompt             string            `json:"prompt,omitempty"`

	// MCPServers are given to the agent as ACP mcpServers (docs/api.md, "User
	// MCP servers").
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// BerthTools, when false, leaves the berth MCP server out of the
	// agent's mcpServers (docs/api.md, "The berth MCP server: agents spawn
	// children"); nil means true.
	BerthTools *bool `json:"berth_tools,omitempty"`

	// MemoryMB bounds the memory of the session's sandbox, in MiB; 0
	// means [sandbox] memory_mb. A provider that cannot enforce it on this
	// host refuses the session (EUnavailable).
	MemoryMB int `json:"memory_mb,omitempty"`

	// Worktree makes the workspace a new git worktree of a repository on a new
	// branch (docs/api.md, "Worktrees, files and mounts"); Repo and Branch are
	// required, Base defaults to HEAD.
	Worktree *WorktreeRequest `json:"worktree,omitempty"`
	// Files are written into the workspace before the agent starts:
	// relative path → content.
	Files map[string]string `json:"files,omitempty"`
	// Mounts names [[sandbox.mounts]] entries to bind read-only.
	Mounts []string `json:"mounts,omitempty"`
	// Models picks, by kind, the model gateway's upstream the agent is
	// pointed at ({"anthropic": "my-upstream"}).
	Models map[string]string `json:"models,omitempty"`

	// MaxCostUSD and MaxTokens are the session's budgets (docs/api.md,
	// "Usage and budgets"); nil is none.
	MaxCostUSD *float64 `json:"max_cost_usd,omitempty"`
	MaxTokens  *int64   `json:"max_tokens,omitempty"`
}

// WorktreeRequest is the worktree option of a create request.
type WorktreeRequest struct {
	Repo   string `json:"repo"`
	Branch string `json:"branch"`
	Base   string `json:"base,omitempty"`
}

// Prompt modes (docs/api.md, "Prompts").
const (
	ModeQueue     = "queue"
	ModeInterrupt = "interrupt"
	ModeSteer     = "steer"
)

// MaxSessionSeconds bounds ttl_seconds and idle_timeout_seconds: ten years,
// far below the ~292 years where seconds overflow a time.Duration.
const MaxSessionSeconds = 10 * 365 * 24 * 3600

// ValidateTimes checks ttl_seconds and idle_timeout_seconds: 0 (none, or
// the default) up to MaxSessionSeconds. Out of range is EInvalid naming the
// field.
func (r *CreateRequest) ValidateTimes() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"ttl_seconds", r.TTLSeconds}, {"idle_timeout_seconds", r.IdleTimeoutSeconds}} {
		if f.v < 0 || f.v > MaxSessionSeconds {
			return &Error{Code: EInvalid, Message: fmt.Sprintf("%s must be between 0 and %d", f.name, MaxSessionSeconds),
				Details: map[string]any{"field": f.name}}
		}
	}
	return nil
}

// ValidateBudget checks max_cost_usd and max_tokens (see ValidateBudget).
func (r *CreateRequest) ValidateBudget() error { return ValidateBudget(r.MaxCostUSD, r.MaxTokens) }

// PromptRequest is the body of POST /v1/sessions/{id}/prompts: Text or
// Content, exactly one of them (docs/api.md, "Prompts" and "Prompt content").
type PromptRequest struct {
	Text    string         `json:"text,omitempty"`
	Content []ContentBlock `json:"content,omitempty"`
	Mode    string         `json:"mode,omitempty"`
}

// MaxContentBlocks bounds the blocks of one prompt.
const MaxContentBlocks = 100

// Validate checks a prompt's shape and its size against the prompt size
// cap. The size of a file block is known only once the session reads it:
// the session checks the whole prompt again then.
func (r *PromptRequest) Validate(maxBytes int) error {
	switch {
	case r.Text != "" && r.Content != nil:
		return Errorf(EInvalid, "a prompt takes text or content, not both")
	case r.Content != nil:
		if len(r.Content) == 0 {
			return Errorf(EInvalid, "content must not be empty")
		}
		if len(r.Content) > MaxContentBlocks {
			return Errorf(EInvalid, "content has %d blocks; at most %d", len(r.Content), MaxContentBlocks)
		}
		for i := range r.Content {
			if err := r.Content[i].validate(i); err != nil {
				return err
			}
		}
		if n := ContentSize(r.Content); maxBytes > 0 && n > maxBytes {
			return TooLarge(n, maxBytes)
		}
	case strings.TrimSpace(r.Text) == "":
		return Errorf(EInvalid, "text must not be empty")
	case maxBytes > 0 && len(r.Text) > maxBytes:
		return TooLarge(len(r.Text), maxBytes)
	}
	switch r.Mode {
	case "", ModeQueue, ModeInterrupt, ModeSteer:
	default:
		return Errorf(EInvalid, "mode must be one of queue, interrupt, steer")
	}
	return nil
}

// PromptResult is the answer to a prompt that was accepted.
type PromptResult struct {
	Status            string `json:"status"`
	TurnID            string `json:"turn_id,omitempty"`
	EntryID           string `json:"entry_id,omitempty"`
	Position          int    `json:"position,omitempty"`
	Generation        int64  `json:"generation,omitempty"`
	InterruptedTurnID string `json:"interrupted_turn_id,omitempty"`
	CanceledEntries   *int   `json:"canceled_entries,omitempty"`
}

// TurnResult is the answer of a prompt sent with ?wait=true.
type TurnResult struct {
	TurnID     string `json:"turn_id"`
	StopReason string `json:"stop_reason"`
	Text       string `json:"text"`
	// Long, when set, is a text too long to hold (Text is then empty):
	// it is read from the log as it is written; FullText gives the text
	// either way.
	Long  LongText  `json:"-"`
	Error *ACPError `json:"error,omitempty"`
}

// FullText is the turn's text, read from the log when it is Long.
func (r *TurnResult) FullText(ctx context.Context) (string, error) {
	if r.Long != nil {
		return r.Long.String(ctx)
	}
	return r.Text, nil
}

// ACPError is an error reported by or about the agent for a turn.
type ACPError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Data is the JSON-RPC error's data as the agent sent it: often the
	// real cause ("Connection error", the provider's answer).
	Data json.RawMessage `json:"data,omitempty"`
	// StopReason is the stop reason an agent gave that ACP does not define
	// (code unknown_stop_reason), kept as it came.
	StopReason string `json:"stop_reason,omitempty"`
}
