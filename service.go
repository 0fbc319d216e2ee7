package berth

import "context"

// SessionService is what the daemon offers its edges (HTTP, Unix socket, the
// in-process CLI). session.Manager implements it; http.Server serves it;
// client.Client implements it over HTTP, so code written against it drives
// a daemon in this process or a remote one alike.
type SessionService interface {
	// Health reports liveness and which store is in use. The manager
	// always answers; a client fails when it cannot reach the daemon.
	Health(ctx context.Context) (*Health, error)
	// Agents lists the agent catalog.
	Agents(ctx context.Context) ([]AgentInfo, error)
	// InstallAgent fetches the package of an agent npx runs ahead, into
	// the daemon's own npm prefix, and returns the agent as it now runs.
	InstallAgent(ctx context.Context, name string) (AgentInfo, error)

	// CreateSession validates req, stores the session and completes the
	// agent handshake before it returns. A failed handshake returns the
	// stored stopped/startup_failed session and a nil error. EInvalid for
	// bad input (unknown agent, missing workspace), EUnavailable for a
	// sandbox that cannot run here, EForbidden when policy refuses.
	CreateSession(ctx context.Context, req CreateRequest) (*Session, error)
	// SpawnChild creates a child of the session parentID (docs/api.md,
	// "Children"):
	// req is the create body, TTLSeconds required. The child can never be
	// given more than its parent has (EForbidden naming what); over
	// limits.max_children or limits.max_depth is EConflict naming the
	// limit. A non-empty idemKey makes a retry with the same key answer the
	// same child (EConflict when its body differs). ENotFound, EConflict
	// when the parent is not active, EInvalid for bad input.
	SpawnChild(ctx context.Context, parentID string, req CreateRequest, idemKey string) (*Session, error)
	// GetSession returns one session. ENotFound.
	GetSession(ctx context.Context, id string) (*Session, error)
	// ListSessions returns a page of sessions. EInvalid for a bad cursor.
	ListSessions(ctx context.Context, f SessionFilter) (*SessionPage, error)
	// StopSession stops the agent and returns the stopped session; stopping
	// a stopped session returns it unchanged. ENotFound.
	StopSession(ctx context.Context, id string) (*Session, error)
	// PatchSession changes a session's name and labels, and its agent's
	// mode, model and config options through ACP (docs/api.md, "Agent
	// controls"), in that
	// order. EInvalid for a bad name or label, or a value the agent does
	// not offer (Details list what it offers); EConflict when the agent
	// lacks the capability or the session is not active; ENotFound. An
	// error after some fields were applied names them in Details["applied"].
	PatchSession(ctx context.Context, id string, p SessionPatch) (*Session, error)
	// DeleteSession stops the session, then deletes its log and managed
	// workspace. ENotFound.
	DeleteSession(ctx context.Context, id string) error

	// Prompt sends a prompt. EInvalid for empty text, ETooLarge over the
	// cap, EConflict when the session cannot take it, ENotFound.
	Prompt(ctx context.Context, id string, req PromptRequest) (*PromptResult, error)
	// WaitTurn blocks until the turn ends and returns its result.
	WaitTurn(ctx context.Context, id, turnID string) (*TurnResult, error)
	// Cancel cancels the turn in flight and returns its id. EConflict when
	// idle, ENotFound.
	Cancel(ctx context.Context, id string) (string, error)

	// ListQueue returns the session's pending prompts and its input
	// generation. ENotFound.
	ListQueue(ctx context.Context, id string) (*QueueView, error)
	// CancelQueueEntry drops a pending prompt. ENotFound if the session has
	// no pending entry with that id.
	CancelQueueEntry(ctx context.Context, id, entryID string) error
	// ResumeSession starts a stopped session's agent again in the same
	// workspace and returns it active. EConflict when it is not stopped or
	// not resumable, ENotFound.
	ResumeSession(ctx context.Context, id string) (*Session, error)

	// Authenticate runs ACP authenticate with methodID, one of the
	// session's acp.auth_methods; a session waiting in starting for it
	// (badge needs_auth) then opens its conversation and becomes active.
	// EInvalid for a method the agent does not offer or refuses, EConflict
	// when the session is not live, ENotFound.
	Authenticate(ctx context.Context, id, methodID string) (*Session, error)
	// ClearSession gives the session a new agent conversation in the same
	// workspace, sandbox and settings, canceling its pending input.
	// EConflict while a turn is in flight unless cancel (which cancels it)
	// and when the session is not active, ENotFound.
	ClearSession(ctx context.Context, id string, cancel bool) (*Session, error)

	// ListPermissions returns a session's permissions, all or in one state.
	// ENotFound.
	ListPermissions(ctx context.Context, id, state string) ([]*Permission, error)
	// DecidePermission answers a pending permission. EInvalid for a bad
	// decision, EConflict when it is no longer pending, ENotFound.
	DecidePermission(ctx context.Context, id, permID string, d PermissionDecision) (*Permission, error)

	// ListElicitations returns a session's elicitations, all or in one
	// state. EInvalid for an unknown state, ENotFound.
	ListElicitations(ctx context.Context, id, state string) ([]*Elicitation, error)
	// GetElicitation returns one elicitation. ENotFound.
	GetElicitation(ctx context.Context, id, eid string) (*Elicitation, error)
	// AnswerElicitation answers a pending elicitation. EInvalid for a bad
	// answer or content the agent's schema refuses, EConflict when it is
	// no longer pending, ENotFound.
	AnswerElicitation(ctx context.Context, id, eid string, a ElicitationAnswer) (*Elicitation, error)

	// Exec runs a command in the session's sandbox and returns its result.
	// EInvalid for a bad request, EConflict when the session is not active,
	// ENotFound.
	Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error)

	// CreateSnapshot archives the session's workspace. ENotFound,
	// EConflict when the workspace is gone.
	CreateSnapshot(ctx context.Context, id string) (*Snapshot, error)
	// ListSnapshots returns the session's snapshots, newest first. ENotFound.
	ListSnapshots(ctx context.Context, id string) ([]*Snapshot, error)

	// Repair checks a stopped session's log and, unless dryRun, appends
	// what closes it properly (dangling tool calls, an open turn, a missing
	// session_stopped). A session stopped by its user needs force.
	// ENotFound.
	Repair(ctx context.Context, id string, dryRun, force bool) (*RepairReport, error)

	// ListEvents pages a session's log: the next page is the one after the
	// last seq returned (what the API calls next_after); an empty page means
	// nothing follows f.After yet. ENotFound, EInvalid for bad bounds.
	ListEvents(ctx context.Context, id string, f EventFilter) ([]Event, error)
	// StreamEvents follows a session's log from after on; its Next returns
	// io.EOF once the session is stopped and every event was read.
	// ENotFound.
	StreamEvents(ctx context.Context, id string, after int64) (EventStream, error)
	// Transcript returns the session's turns. ENotFound.
	Transcript(ctx context.Context, id string) ([]TranscriptTurn, error)

	// StreamChanges follows the changes of every session from lastEventID
	// on (a SessionChange.ID; "" starts with the next change). An id this
	// daemon cannot resume from makes the first change a resync. EInvalid
	// when lastEventID is not of the form "<epoch>-<seq>".
	StreamChanges(ctx context.Context, lastEventID string) (ChangeStream, error)

	// CheckpointService: checkpoints, rewind and fork (docs/api.md,
	// "Checkpoints, rewind and fork").
	CheckpointService
}
