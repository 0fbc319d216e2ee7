package acp

import (
	"context"
	"encoding/json"
)

// Elicitation methods (ACP, agent to client).
const (
	MethodElicitationCreate   = "elicitation/create"
	MethodElicitationComplete = "elicitation/complete"
)

// ElicitationCapabilities says which elicitation modes the client serves;
// an empty object means the mode is offered.
type ElicitationCapabilities struct {
	Form *struct{} `json:"form,omitempty"`
	URL  *struct{} `json:"url,omitempty"`
}

// bothModes offers form and URL elicitations.
var bothModes = &ElicitationCapabilities{Form: &struct{}{}, URL: &struct{}{}}

// CreateElicitationRequest is the agent's question: a form built from
// RequestedSchema (mode form) or a URL to open (mode url). SessionID or
// RequestID scopes it; berth serves one session per connection, so it
// takes both alike.
type CreateElicitationRequest struct {
	SessionID       string          `json:"sessionId,omitempty"`
	ToolCallID      string          `json:"toolCallId,omitempty"`
	RequestID       json.RawMessage `json:"requestId,omitempty"`
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	ElicitationID   string          `json:"elicitationId,omitempty"`
	URL             string          `json:"url,omitempty"`
}

// CreateElicitationResponse answers an elicitation: action accept (with
// content in form mode), decline or cancel.
type CreateElicitationResponse struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// ElicitationCancelled is the answer to a question nobody will answer.
func ElicitationCancelled() CreateElicitationResponse {
	return CreateElicitationResponse{Action: "cancel"}
}

// ElicitationHandler is the optional part of a ClientHandler that serves
// elicitation/create; a handler without it answers method not found.
type ElicitationHandler interface {
	CreateElicitation(ctx context.Context, req CreateElicitationRequest) (CreateElicitationResponse, error)
}
