package berth

import (
	"context"
	"encoding/json"
)

// TranscriptTurn is one turn of a session as a reader wants it: what was
// asked, what the agent said, the tool calls it made and how it ended.
type TranscriptTurn struct {
	TurnID string `json:"turn_id"`
	Prompt string `json:"prompt"`
	// Content is the prompt's blocks when it was sent as content (Prompt
	// is then the text of its text blocks).
	Content []ContentBlock `json:"content,omitempty"`
	Source  string         `json:"source,omitempty"`
	Text    string         `json:"text"`
	// Long, when set, is a text too long to hold (Text is then empty):
	// it is read from the log as it is written; FullText gives the text
	// either way.
	Long LongText `json:"-"`
	// Thoughts are the agent's thoughts, up to MaxTranscriptThoughts (the
	// log keeps them all).
	Thoughts   string              `json:"thoughts,omitempty"`
	ToolCalls  []TranscriptToolUse `json:"tool_calls"`
	StopReason string              `json:"stop_reason,omitempty"`
	Error      json.RawMessage     `json:"error,omitempty"`
	Usage      json.RawMessage     `json:"usage,omitempty"`
	StartSeq   int64               `json:"start_seq"`
	EndSeq     int64               `json:"end_seq,omitempty"`
}

// MaxTranscriptThoughts caps the thoughts a transcript turn carries.
const MaxTranscriptThoughts = 1 << 20

// FullText is the turn's text, read from the log when it is Long.
func (t *TranscriptTurn) FullText(ctx context.Context) (string, error) {
	if t.Long != nil {
		return t.Long.String(ctx)
	}
	return t.Text, nil
}

// TranscriptStreamer is implemented by services that hand a session's
// transcript over a turn at a time, so that it is never held whole: fn
// gets each turn in order, and an error from it ends the walk.
type TranscriptStreamer interface {
	TranscriptEach(ctx context.Context, id string, fn func(*TranscriptTurn) error) error
}

// TranscriptToolUse is one tool call inside a transcript turn.
type TranscriptToolUse struct {
	ToolCallID string `json:"tool_call_id"`
	Title      string `json:"title"`
	Kind       string `json:"kind"`
	Status     string `json:"status"`
}
