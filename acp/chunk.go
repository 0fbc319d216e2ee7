package acp

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
	"unsafe"
)

// member returns the raw value of key in the JSON object b, in one pass
// that skips the other members' values without decoding them. ok is false
// when b is not an object, key is absent, or a key is written with escapes.
func member(b []byte, key string) (val []byte, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		k, v, next, ok := scanMember(b, i)
		if !ok || bytes.IndexByte(k, '\\') >= 0 {
			return nil, false
		}
		if string(k[1:len(k)-1]) == key {
			val = v
		}
		i = next
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return val, val != nil
}

// stringMember returns the value of key in object b when it is a JSON
// string without escapes.
func stringMember(b []byte, key string) (string, bool) {
	v, ok := member(b, key)
	if !ok || len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// scanTextChunk reads a session/update whose update is a text chunk
// (agent, thought or user message) without decoding its text: raw is the
// text as the agent wrote it, a JSON string literal (a span of params). ok
// is false for anything else, which the general decoder then handles.
func scanTextChunk(params []byte) (sessionID, kind string, raw []byte, ok bool) {
	// The whole of params is JSON (the text included), checked without
	// allocating; and the text is UTF-8, so it can be stored as it is.
	if !json.Valid(params) {
		return "", "", nil, false
	}
	sessionID, _ = stringMember(params, "sessionId")
	update, ok := member(params, "update")
	if !ok {
		return "", "", nil, false
	}
	if kind, ok = stringMember(update, "sessionUpdate"); !ok || !isChunk(kind) {
		return "", "", nil, false
	}
	content, ok := member(update, "content")
	if !ok {
		return "", "", nil, false
	}
	if typ, ok := stringMember(content, "type"); !ok || typ != "text" {
		return "", "", nil, false
	}
	raw, ok = member(content, "text")
	if !ok || len(raw) < 2 || raw[0] != '"' || !utf8.Valid(raw) {
		return "", "", nil, false
	}
	return sessionID, kind, raw, true
}

// offsetIn returns where sub, a subslice of b, starts in b; -1 when it is
// not one.
func offsetIn(b, sub []byte) int {
	if len(sub) == 0 || len(b) == 0 {
		return -1
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	if p < base || p+uintptr(len(sub)) > base+uintptr(len(b)) {
		return -1
	}
	return int(p - base)
}
