package acp

import "encoding/json"

// Update kinds (the sessionUpdate discriminator) berth knows.
const (
	UpdateUserMessageChunk  = "user_message_chunk"
	UpdateAgentMessageChunk = "agent_message_chunk"
	UpdateAgentThoughtChunk = "agent_thought_chunk"
	UpdateToolCall          = "tool_call"
	UpdateToolCallUpdate    = "tool_call_update"
	UpdatePlan              = "plan"
	UpdateAvailableCommands = "available_commands_update"
	UpdateCurrentMode       = "current_mode_update"
	UpdateConfigOption      = "config_option_update"
	UpdateUsage             = "usage_update"
	UpdateSessionInfo       = "session_info_update"
)

// Update is one session/update, decoded once into the fields berth uses.
// Raw holds the whole update for every kind but text chunks (whose payload
// is Text), so kinds this version does not know are kept, never dropped.
type Update struct {
	Kind       string          `json:"sessionUpdate"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Title      string          `json:"title,omitempty"`
	ToolKind   string          `json:"kind,omitempty"`
	Status     string          `json:"status,omitempty"`
	Entries    json.RawMessage `json:"entries,omitempty"`
	Used       json.RawMessage `json:"used,omitempty"`
	Size       json.RawMessage `json:"size,omitempty"`
	Cost       json.RawMessage `json:"cost,omitempty"`
	Raw        json.RawMessage `json:"-"`

	// text is the chunk's text when the decoder already extracted it.
	text    string
	hasText bool
}

// ParseUpdate decodes an update. A payload that is not an object yields
// Kind "" with Raw set.
func ParseUpdate(raw json.RawMessage) Update {
	var u Update
	if err := json.Unmarshal(raw, &u); err != nil {
		u = Update{}
	}
	u.Raw = raw
	return u
}

// isChunk reports whether an update kind is a message or thought chunk.
func isChunk(kind string) bool {
	switch kind {
	case UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk:
		return true
	}
	return false
}

// Known reports whether berth maps this kind to a typed event.
func (u *Update) Known() bool {
	switch u.Kind {
	case UpdateUserMessageChunk, UpdateAgentMessageChunk, UpdateAgentThoughtChunk, UpdateToolCall,
		UpdateToolCallUpdate, UpdatePlan, UpdateAvailableCommands, UpdateCurrentMode, UpdateConfigOption,
		UpdateUsage:
		return true
	}
	return false
}

// Text returns the text of a chunk's content block ("" when not text).
func (u *Update) Text() string {
	if u.hasText {
		return u.text
	}
	if len(u.Content) == 0 || u.Content[0] != '{' {
		return ""
	}
	var b ContentBlock
	if json.Unmarshal(u.Content, &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}
