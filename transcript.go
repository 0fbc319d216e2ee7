package berth

import "encoding/json"

// TranscriptTurn is one turn of a session as a reader wants it: what was
// asked, what the agent said, the tool calls it made and how it ended.
type TranscriptTurn struct {
	TurnID string `json:"turn_id"`
	Prompt string `json:"prompt"`
	// Content is the prompt's blocks when it was sent as content (Prompt
	// is then the text of its text blocks).
	Content    []ContentBlock      `json:"content,omitempty"`
	Source     string              `json:"source,omitempty"`
	Text       string              `json:"text"`
	Thoughts   string              `json:"thoughts,omitempty"`
	ToolCalls  []TranscriptToolUse `json:"tool_calls"`
	StopReason string              `json:"stop_reason,omitempty"`
	Error      json.RawMessage     `json:"error,omitempty"`
	Usage      json.RawMessage     `json:"usage,omitempty"`
	StartSeq   int64               `json:"start_seq"`
	EndSeq     int64               `json:"end_seq,omitempty"`
}

// TranscriptToolUse is one tool call inside a transcript turn.
type TranscriptToolUse struct {
	ToolCallID string `json:"tool_call_id"`
	Title      string `json:"title"`
	Kind       string `json:"kind"`
	Status     string `json:"status"`
}
