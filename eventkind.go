package berth

import "slices"

// Event types: the Type of an Event (docs/api.md, The objects: Events).
// Each one is declared with what it is and its data in eventKinds below;
// a test fails for an Event* type constant anywhere in the module that is
// not.
const (
	EventSessionCreated      = "session_created"
	EventAgentFetch          = "agent_fetch"
	EventSessionStarted      = "session_started"
	EventSessionStopped      = "session_stopped"
	EventConversationCleared = "conversation_cleared"
	EventRuntimeWarning      = "runtime_warning"
	EventRuntimeRecovered    = "runtime_recovered"
	EventExec                = "exec"

	EventTurnStarted    = "turn_started"
	EventTurnEnded      = "turn_ended"
	EventPromptQueued   = "prompt_queued"
	EventPromptCanceled = "prompt_canceled"
	EventPromptSteered  = "prompt_steered"

	EventAgentMessage   = "agent_message"
	EventAgentThought   = "agent_thought"
	EventUserMessage    = "user_message"
	EventToolCall       = "tool_call"
	EventToolCallUpdate = "tool_call_update"
	EventPlan           = "plan"
	EventUsage          = "usage"
	EventModeUpdate     = "mode_update"
	EventConfigUpdate   = "config_update"
	EventCommandsUpdate = "commands_update"
	EventAgentStderr    = "agent_stderr"
	EventACPUnknown     = "acp_unknown"

	EventPermissionRequested  = "permission_requested"
	EventPermissionResolved   = "permission_resolved"
	EventElicitationRequested = "elicitation_requested"
	EventElicitationResolved  = "elicitation_resolved"
	EventFileRead             = "file_read"
	EventFileWritten          = "file_written"
	EventFileRefused          = "file_refused"
	EventTerminalStarted      = "terminal_started"
	EventTerminalExited       = "terminal_exited"
	EventModelCall            = "model_call"
	EventBudgetExceeded       = "budget_exceeded"
	EventNetworkDenied        = "network_denied"

	EventChildStarted = "child_started"
	EventChildStopped = "child_stopped"

	EventCheckpointCreated = "checkpoint_created"
	EventWorkspaceRewound  = "workspace_rewound"
	EventCheckpointPruned  = "checkpoint_pruned"
)

// EventAbout is what the events of a kind are about.
type EventAbout string

// What event kinds are about.
const (
	// AboutSession: the session's life (created, started, stopped, its
	// conversation cleared, its runtime's health) and what a client ran in it.
	AboutSession EventAbout = "session"
	// AboutTurn: a turn and the prompts that make it.
	AboutTurn EventAbout = "turn"
	// AboutAgent: what the agent reported: its updates, its stderr.
	AboutAgent EventAbout = "agent"
	// AboutRequest: what the agent asked of berth (a permission, an
	// answer, a file, a terminal) and how it was answered.
	AboutRequest EventAbout = "request"
	// AboutChild: a child session, in its parent's log.
	AboutChild EventAbout = "child"
	// AboutCheckpoint: the workspace's checkpoints.
	AboutCheckpoint EventAbout = "checkpoint"
)

// EventKind declares one type of event. The kinds (EventKinds) are the one
// list of types: hooks take theirs from it (a hook may follow every kind,
// docs/api.md, Hooks), and tests check `berth logs`, `berth attach`, the
// web UI and docs/api.md's list of types against it.
type EventKind struct {
	// Name is the event's type on the wire: Event.Type, and the SSE
	// event's name.
	Name string
	// About is what the event is about.
	About EventAbout
	// Doc says in one line what the event records, its data's main
	// fields in brackets.
	Doc string
}

// eventKinds are all the event types, in the order of docs/api.md's list.
var eventKinds = []EventKind{
	{EventSessionCreated, AboutSession, "the session was created [agent, sandbox, workspace]"},
	{EventSessionStarted, AboutSession, "the agent is up and its conversation open [agent_info, protocol_version, capabilities, resumed_by]"},
	{EventSessionStopped, AboutSession, "the session stopped; always its last event but for the model calls that end after it [stop_reason, failure]"},
	{EventTurnStarted, AboutTurn, "a prompt began a turn [text, content, source]"},
	{EventConversationCleared, AboutSession, "the session was given a new agent conversation [old_acp_session_id, acp_session_id, canceled_entries]"},
	{EventAgentMessage, AboutAgent, "a chunk of the agent's answer [text]"},
	{EventAgentThought, AboutAgent, "a chunk of the agent's thinking [text]"},
	{EventUserMessage, AboutAgent, "a chunk of a user message the agent sent back [text]"},
	{EventToolCall, AboutAgent, "the agent began a tool call [tool_call_id, title, kind, status, raw]"},
	{EventToolCallUpdate, AboutAgent, "a tool call's progress [tool_call_id, status, content, raw]"},
	{EventPlan, AboutAgent, "the agent's plan [entries]"},
	{EventUsage, AboutAgent, "the agent's context use and cost [used, size, cost]"},
	{EventModeUpdate, AboutAgent, "the session's mode changed, by the agent or a client [current, source, raw]"},
	{EventConfigUpdate, AboutAgent, "the session's config options changed, by the agent or a client [changed, source, raw]"},
	{EventCommandsUpdate, AboutAgent, "the agent's slash commands changed [commands, raw]"},
	{EventTurnEnded, AboutTurn, "the turn ended [stop_reason, error]"},
	{EventPromptQueued, AboutTurn, "a prompt or a steer was queued [entry_id, kind, position]"},
	{EventPromptCanceled, AboutTurn, "a queued prompt was dropped [entry_id]"},
	{EventPromptSteered, AboutTurn, "a steer went into the turn in flight [entry_id]"},
	{EventPermissionRequested, AboutRequest, "the agent asks for a permission [permission]"},
	{EventPermissionResolved, AboutRequest, "a permission was decided [permission_id, option_id, decided_by]"},
	{EventElicitationRequested, AboutRequest, "the agent asks for input [elicitation]"},
	{EventElicitationResolved, AboutRequest, "a question was answered [elicitation_id, action, content, decided_by]"},
	{EventFileRead, AboutRequest, "the agent read a file [path, bytes]"},
	{EventFileWritten, AboutRequest, "the agent wrote a file [path, bytes]"},
	{EventFileRefused, AboutRequest, "a file or terminal request outside the workspace was refused [path, op, reason]"},
	{EventTerminalStarted, AboutRequest, "a terminal the agent asked for started [terminal_id, command]"},
	{EventTerminalExited, AboutRequest, "a terminal's command exited [terminal_id, command, exit_code, signal]"},
	{EventModelCall, AboutRequest, "the agent called a model through the model gateway, never its prompt or answer [upstream, model, status, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, duration_ms, first_byte_ms]"},
	{EventBudgetExceeded, AboutSession, "the session's spending, its subtree's included, reached a budget [limit, max, spent]"},
	{EventNetworkDenied, AboutSession, "the egress proxy refused a connection the allow list does not let through; repeats within a minute are told once [host, port]"},
	{EventExec, AboutSession, "a client's command ran in the sandbox [command, exit_code, signal, timed_out, duration_ms]"},
	{EventAgentFetch, AboutSession, "the agent's npm package is fetched before its first start, which waits for it [package, phase: started|fetching|done|failed, elapsed_ms, error]"},
	{EventRuntimeWarning, AboutSession, "something went wrong that did not stop the session [reason]"},
	{EventRuntimeRecovered, AboutSession, "a hung turn's agent is active again [reason]"},
	{EventAgentStderr, AboutAgent, "a line of the agent's stderr [line]"},
	{EventChildStarted, AboutChild, "a child was spawned [child_id, agent, name]"},
	{EventChildStopped, AboutChild, "a child stopped [child_id, stop_reason, text]"},
	{EventCheckpointCreated, AboutCheckpoint, "the workspace was recorded before a turn [id, turn_id, files, bytes, skipped]"},
	{EventWorkspaceRewound, AboutCheckpoint, "the workspace was restored to a checkpoint [checkpoint_id, turn_id, written, removed, conflicts]"},
	{EventCheckpointPruned, AboutCheckpoint, "a checkpoint was removed to keep its tree under max_tree_bytes [checkpoint_id, turn_id, session_id, freed_bytes, removed_bytes, tree_bytes]"},
	{EventACPUnknown, AboutAgent, "an update or notification this version does not know, kept as sent [raw]"},
}

// EventKinds returns every event type, in the order of docs/api.md's list.
func EventKinds() []EventKind {
	return slices.Clone(eventKinds)
}

// IsEventKind reports whether name is a declared event type.
func IsEventKind(name string) bool {
	return slices.ContainsFunc(eventKinds, func(k EventKind) bool { return k.Name == name })
}
