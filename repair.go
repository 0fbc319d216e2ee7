package berth

// Kinds of repair issue.
const (
	RepairSessionNotStopped = "session_not_stopped"
	RepairForceRequired     = "force_required"
	RepairSeqGap            = "seq_gap"
	RepairSeqDuplicate      = "seq_duplicate"
	RepairInvalidJSON       = "invalid_json"
	RepairDanglingToolCall  = "dangling_tool_call"
	RepairOpenTurn          = "open_turn"
	RepairMissingStopped    = "missing_session_stopped"
)

// RepairItem is one issue found in a session's log, or one action taken
// (or planned) to repair it.
type RepairItem struct {
	Kind       string `json:"kind"`
	Seq        int64  `json:"seq,omitempty"`
	TurnID     string `json:"turn_id,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Event is the type of the event an action appends.
	Event   string `json:"event,omitempty"`
	Message string `json:"message"`
}

// RepairReport is the answer of POST /v1/sessions/{id}/repair.
type RepairReport struct {
	Issues    []RepairItem `json:"issues"`
	Actions   []RepairItem `json:"actions"`
	Persisted bool         `json:"persisted"`
}
