package acp

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// TextPieceBytes is the most text, as written (escaped), that berth keeps
// in one piece of a text chunk: a longer chunk is cut (SplitTextChunk,
// SplitStringBody) so that no reader, writer or store holds tens of MB of
// one agent line at once.
const TextPieceBytes = 1 << 20

// SplitStringBody cuts the body of a JSON string literal (the bytes
// between its quotes, as the agent wrote them) into pieces of at most max
// bytes, each a valid literal body: never inside an escape (\n, \uXXXX, a
// surrogate pair written as two escapes) nor inside a UTF-8 character.
func SplitStringBody(body []byte, max int) [][]byte {
	var out [][]byte
	for len(body) > max {
		cut := 0
		for i := 0; i < len(body); {
			n := literalUnit(body[i:])
			if i+n > max {
				break
			}
			i += n
			cut = i
		}
		if cut == 0 {
			// One unit longer than max (never, for max >= 12): keep it whole.
			cut = literalUnit(body)
		}
		out = append(out, body[:cut])
		body = body[cut:]
	}
	return append(out, body)
}

// literalUnit is the length of the first unit of a literal body that must
// not be cut: an escape (a surrogate pair's two escapes together), a UTF-8
// character, or a byte.
func literalUnit(b []byte) int {
	if b[0] != '\\' {
		if b[0] < utf8.RuneSelf {
			return 1
		}
		_, n := utf8.DecodeRune(b)
		return n
	}
	if len(b) < 2 {
		return len(b)
	}
	if b[1] != 'u' || len(b) < 6 {
		return min(2, len(b))
	}
	// \uD800-\uDBFF is the first half of a pair: the second goes with it.
	if hi := b[2] | 0x20; hi == 'd' && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
		if c := b[3] | 0x20; c == '8' || c == '9' || c == 'a' || c == 'b' {
			return 12
		}
	}
	return 6
}

// SplitTextChunk cuts a JSON-RPC line that is a session/update text chunk
// (agent, thought or user message) with more than max bytes of text into
// lines of the same update, each with a piece of the text (SplitStringBody)
// and nothing else of it, each ending in a newline. ok is false for any
// other line, and for one whose text is max bytes or less.
func SplitTextChunk(line []byte, max int) (lines [][]byte, ok bool) {
	e, ok := scanEnvelope(bytes.TrimSpace(line))
	if !ok || e.method == nil || !isNull(e.id) {
		return nil, false
	}
	if name, ok := e.methodName(); !ok || name != MethodSessionUpdate {
		return nil, false
	}
	sid, kind, raw, ok := scanTextChunk(e.params)
	if !ok || sid == "" || len(raw)-2 <= max {
		return nil, false
	}
	sidJSON, _ := json.Marshal(sid)
	head := make([]byte, 0, 128)
	head = append(head, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`...)
	head = append(head, sidJSON...)
	head = append(head, `,"update":{"sessionUpdate":"`...)
	head = append(head, kind...)
	head = append(head, `","content":{"type":"text","text":"`...)
	const tail = `"}}}}` + "\n"
	for _, p := range SplitStringBody(raw[1:len(raw)-1], max) {
		b := make([]byte, 0, len(head)+len(p)+len(tail))
		lines = append(lines, append(append(append(b, head...), p...), tail...))
	}
	return lines, true
}
