package live

import (
	"encoding/json"

	"github.com/berth-sh/berth"
	"github.com/berth-sh/berth/acp"
)

// MaxEventText caps the text of one agent_message or agent_thought event:
// a longer chunk is logged as several events in a row, each a piece of
// it. The log's writer, the store and every reader hold an event whole;
// a chunk of tens of MB costs the store several times that while it is
// written (SQLite builds the row in memory, then pages it out), and a
// browser one message of that size. (A shim cuts such chunks the same
// way before the daemon reads them: acp.SplitTextChunk.)
const MaxEventText = acp.TextPieceBytes

// maxEventData caps the data of any other event from the agent (a tool
// call's content, a plan, an unknown update): past it the event is kept
// without the agent's payload (see stubData), saying how big it was.
const maxEventData = 16 << 20

// stubData is the data of an event whose payload was size bytes, over
// maxEventData: what identifies it, and how big the payload was.
func stubData(u *acp.Update, size int) json.RawMessage {
	stub := map[string]any{"truncated_bytes": size}
	if u.Kind == acp.UpdateToolCall || u.Kind == acp.UpdateToolCallUpdate {
		stub["tool_call_id"], stub["title"], stub["kind"], stub["status"] = u.ToolCallID, u.Title, u.ToolKind, u.Status
	}
	b, _ := json.Marshal(stub)
	return b
}

// TextPrefix and TextSuffix frame a text chunk's data around its literal.
const (
	TextPrefix = `{"text":"`
	TextSuffix = `"}`
)

// eventPieces is the data of the events one update is logged as: itself,
// or, for a text chunk longer than MaxEventText, its text cut in pieces,
// or, for anything else over maxEventData, a stub.
func eventPieces(u *acp.Update, typ string, data json.RawMessage) []json.RawMessage {
	isText := typ == berth.EventAgentMessage || typ == berth.EventAgentThought || typ == berth.EventUserMessage
	if isText && len(data) > MaxEventText+len(TextPrefix)+len(TextSuffix) &&
		string(data[:len(TextPrefix)]) == TextPrefix && string(data[len(data)-len(TextSuffix):]) == TextSuffix {
		parts := acp.SplitStringBody(data[len(TextPrefix):len(data)-len(TextSuffix)], MaxEventText)
		out := make([]json.RawMessage, len(parts))
		for i, p := range parts {
			b := make([]byte, 0, len(TextPrefix)+len(p)+len(TextSuffix))
			out[i] = append(append(append(b, TextPrefix...), p...), TextSuffix...)
		}
		return out
	}
	if len(data) > maxEventData {
		return []json.RawMessage{stubData(u, len(data))}
	}
	return []json.RawMessage{data}
}
