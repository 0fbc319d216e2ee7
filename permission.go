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

// Decisions a user may give instead of an option id; each selects the
// agent's option of that ACP kind.
const (
	DecisionAllowOnce    = "allow_once"
	DecisionAllowAlways  = "allow_always"
	DecisionRejectOnce   = "reject_once"
	DecisionRejectAlways = "reject_always"
)

// PermissionDecision is the body of POST /v1/sessions/{id}/permissions/{perm}:
// exactly one of OptionID and Decision.
type PermissionDecision struct {
	OptionID string `json:"option_id,omitempty"`
	Decision string `json:"decision,omitempty"`
}

// Validate checks the shape of a decision; whether the option exists is
// for the permission to say.
func (d PermissionDecision) Validate() error {
	switch {
	case d.OptionID == "" && d.Decision == "":
		return Errorf(EInvalid, "give option_id or decision")
	case d.OptionID != "" && d.Decision != "":
		return Errorf(EInvalid, "give option_id or decision, not both")
	}
	switch d.Decision {
	case "", DecisionAllowOnce, DecisionAllowAlways, DecisionRejectOnce, DecisionRejectAlways:
		return nil
	}
	return Errorf(EInvalid, "decision must be one of allow_once, allow_always, reject_once, reject_always")
}

// Option returns the option of p that d selects. EInvalid if there is none.
func (d PermissionDecision) Option(p *Permission) (PermissionOption, error) {
	for _, o := range p.Options {
		if (d.OptionID != "" && o.ID == d.OptionID) || (d.Decision != "" && o.Kind == d.Decision) {
			return o, nil
		}
	}
	if d.OptionID != "" {
		return PermissionOption{}, Errorf(EInvalid, "permission %s has no option %q", p.ID, d.OptionID)
	}
	return PermissionOption{}, Errorf(EInvalid, "permission %s offers no %s option", p.ID, d.Decision)
}
