package berth

import (
	"encoding/json"
	"time"
)

// Permission states.
const (
	PermissionPending  = "pending"
	PermissionDecided  = "decided"
	PermissionExpired  = "expired"
	PermissionCanceled = "canceled"
)

// Who decided a permission.
const (
	DecidedByUser    = "user"
	DecidedByPolicy  = "policy"
	DecidedByTimeout = "timeout"
	DecidedByCancel  = "cancel"
)

// PermissionOption is one choice the agent offers for a permission request.
type PermissionOption struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Kind is the ACP option kind: allow_once, allow_always, reject_once,
	// reject_always.
	Kind string `json:"kind"`
}

// Permission is an agent's request to run a tool call, as an API object.
type Permission struct {
	ID        string             `json:"id"`
	SessionID string             `json:"session_id"`
	TurnID    string             `json:"turn_id"`
	ToolCall  json.RawMessage    `json:"tool_call"`
	Options   []PermissionOption `json:"options"`
	State     string             `json:"state"`
	OptionID  string             `json:"option_id,omitempty"`
	DecidedBy string             `json:"decided_by,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	DecidedAt *time.Time         `json:"decided_at,omitempty"`
}
