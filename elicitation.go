package berth

import (
	"encoding/json"
	"time"
)

// Elicitation states.
const (
	ElicitationPending   = "pending"
	ElicitationAccepted  = "accepted"
	ElicitationDeclined  = "declined"
	ElicitationCancelled = "cancelled"
)

// Elicitation modes (ACP elicitation/create).
const (
	ElicitationModeForm = "form"
	ElicitationModeURL  = "url"
)

// Answers to an elicitation (ACP CreateElicitationResponse actions).
const (
	ElicitationAccept  = "accept"
	ElicitationDecline = "decline"
	ElicitationCancel  = "cancel"
)

// Bounds on what an agent may ask for (docs/api.md, "Elicitations").
const (
	// MaxElicitationSchemaBytes caps the JSON of a requested schema.
	MaxElicitationSchemaBytes = 64 << 10
	// MaxElicitationFields caps the properties of a requested schema.
	MaxElicitationFields = 64
	// MaxPendingElicitations caps the elicitations of one session that
	// wait for an answer at once; the agent's next one is refused.
	MaxPendingElicitations = 8
	// MaxElicitationMessageBytes caps an elicitation's message.
	MaxElicitationMessageBytes = 16 << 10
	// MaxElicitationURLBytes caps a url elicitation's address.
	MaxElicitationURLBytes = 8 << 10
	// MaxElicitationIDBytes caps the agent's ids an elicitation keeps
	// (its elicitation id, its tool call id).
	MaxElicitationIDBytes = 256
)

// Elicitation is an agent's request for input from the user (ACP
// elicitation/create) as an API object: a form built from RequestedSchema,
// or a URL to open.
type Elicitation struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	// Mode is form or url.
	Mode    string `json:"mode"`
	Message string `json:"message"`
	// RequestedSchema is the agent's JSON Schema of the form (form mode).
	RequestedSchema json.RawMessage `json:"requested_schema,omitempty"`
	// URL is what the user is asked to open (url mode).
	URL string `json:"url,omitempty"`
	// ACPElicitationID is the agent's own id of a url-mode elicitation.
	ACPElicitationID string `json:"acp_elicitation_id,omitempty"`
	// ToolCallID is the tool call the elicitation belongs to, if any.
	ToolCallID string `json:"tool_call_id,omitempty"`
	State      string `json:"state"`
	// Action is the answer given: accept, decline or cancel.
	Action string `json:"action,omitempty"`
	// Content is what was accepted (form mode).
	Content    map[string]any `json:"content,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	ResolvedAt *time.Time     `json:"resolved_at,omitempty"`
	// DecidedBy is user, cancel (the turn or session ended) or timeout.
	DecidedBy string `json:"decided_by,omitempty"`
}

// ElicitationAnswer is the body of POST
// /v1/sessions/{id}/elicitations/{eid}.
type ElicitationAnswer struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// Validate checks the shape of an answer; whether its content fits the
// schema is for CheckElicitationContent.
func (a ElicitationAnswer) Validate() error {
	switch a.Action {
	case ElicitationAccept:
		return nil
	case ElicitationDecline, ElicitationCancel:
		if len(a.Content) > 0 {
			return Errorf(EInvalid, "content goes with action accept only")
		}
		return nil
	case "":
		return Errorf(EInvalid, "action is required: accept, decline or cancel")
	}
	return Errorf(EInvalid, "action must be one of accept, decline, cancel")
}

// ElicitationStateOf is the state an elicitation answered with action reaches.
func ElicitationStateOf(action string) string {
	switch action {
	case ElicitationAccept:
		return ElicitationAccepted
	case ElicitationDecline:
		return ElicitationDeclined
	}
	return ElicitationCancelled
}
