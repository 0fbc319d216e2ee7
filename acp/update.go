package acp

import (
	"bytes"
	"encoding/json"
)

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

	// rawText is a text chunk's text as the agent wrote it (a JSON string
	// literal) when the decoder left it undecoded: params[at:at+len(rawText)].
	// owned says params is the update's to overwrite (a long line read into
	// a buffer of its own, which the reader never reuses).
	rawText []byte
	params  []byte
	at      int
	owned   bool
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

// RawText returns a text chunk's text as the agent wrote it, a valid JSON
// string literal in UTF-8, when it was not decoded (nil otherwise). It is
// valid only during the SessionUpdate call: copy what is kept.
func (u *Update) RawText() []byte { return u.rawText }

// TextJSON returns prefix, RawText and suffix joined, e.g. {"text":…}: the
// text is copied at most once, and not at all when the update owns the
// line it came in (a long one): the prefix and suffix are then written
// over the line's bytes around the text, in place. Call it once, during
// SessionUpdate; nil when there is no RawText.
func (u *Update) TextJSON(prefix, suffix string) []byte {
	raw := u.rawText
	if raw == nil {
		return nil
	}
	end := u.at + len(raw)
	if u.owned && u.at >= len(prefix) && end+len(suffix) <= len(u.params) {
		start := u.at - len(prefix)
		copy(u.params[start:], prefix)
		copy(u.params[end:], suffix)
		u.owned = false
		return u.params[start : end+len(suffix) : end+len(suffix)]
	}
	b := make([]byte, 0, len(prefix)+len(raw)+len(suffix))
	b = append(b, prefix...)
	b = append(b, raw...)
	return append(b, suffix...)
}

// Clone returns a copy of u that stays valid after the SessionUpdate call.
func (u Update) Clone() Update {
	if u.rawText != nil {
		u.rawText = bytes.Clone(u.rawText)
		u.params, u.at, u.owned = u.rawText, 0, false
	}
	return u
}

// Text returns the text of a chunk's content block ("" when not text).
func (u *Update) Text() string {
	if u.rawText != nil {
		var s string
		_ = json.Unmarshal(u.rawText, &s)
		return s
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
