package acp

import (
	"bytes"
	"encoding/json"
)

// envelope holds the top-level members of one JSON-RPC message as raw spans
// of the line they were read from (nil when absent). Spans are only valid
// until the reader reads the next line.
type envelope struct {
	id, method, params, result, err []byte
}

// scanEnvelope splits a line holding one JSON object into the members
// JSON-RPC uses, in a single pass that checks the object's structure
// (strings, nesting, separators) but not the contents of the values: each
// value is validated where it is decoded (params by the handler's decoder,
// result by the caller's). This saves the full validation encoding/json
// would otherwise run over the whole line before every decode.
func scanEnvelope(b []byte) (envelope, bool) {
	var e envelope
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return e, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return e, skipSpace(b, i+1) == len(b)
	}
	for {
		k, v, next, ok := scanMember(b, i)
		if !ok {
			return e, false
		}
		e.set(k, v)
		i = next
		if i >= len(b) {
			return e, false
		}
		if b[i] == '}' {
			return e, skipSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return e, false
		}
		i = skipSpace(b, i+1)
	}
}

// scanMember reads the object member at b[i:], `"key": value`: its key
// (quoted, as written) and value, and the index of what follows it, past
// white space. ok is false when b holds no whole member there.
func scanMember(b []byte, i int) (quotedKey, val []byte, next int, ok bool) {
	kEnd, ok := skipString(b, i)
	if !ok {
		return nil, nil, 0, false
	}
	quotedKey = b[i:kEnd]
	i = skipSpace(b, kEnd)
	if i >= len(b) || b[i] != ':' {
		return nil, nil, 0, false
	}
	vStart := skipSpace(b, i+1)
	vEnd, ok := skipValue(b, vStart)
	if !ok {
		return nil, nil, 0, false
	}
	return quotedKey, b[vStart:vEnd], skipSpace(b, vEnd), true
}

// set records one member; a later duplicate wins, as with encoding/json.
func (e *envelope) set(quotedKey, val []byte) {
	key := quotedKey[1 : len(quotedKey)-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		// An escaped key is rare: let encoding/json unquote it.
		var k string
		if json.Unmarshal(quotedKey, &k) != nil {
			return
		}
		key = []byte(k)
	}
	switch string(key) {
	case "id":
		e.id = val
	case "method":
		e.method = val
	case "params":
		e.params = val
	case "result":
		e.result = val
	case "error":
		e.err = val
	}
}

// methodName decodes the method member, which must be a JSON string.
func (e *envelope) methodName() (string, bool) {
	m := e.method
	if len(m) < 2 || m[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(m, '\\') < 0 {
		return string(m[1 : len(m)-1]), true
	}
	var s string
	if json.Unmarshal(m, &s) != nil {
		return "", false
	}
	return s, true
}

// isNull reports whether a raw value is absent or JSON null.
func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the JSON string starting at i.
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return i, false
}

// skipValue returns the index just past the JSON value starting at i:
// strings and nesting are followed exactly, scalars up to the next
// delimiter.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		// The closers still expected, innermost last.
		var stack [32]byte
		open := stack[:0]
		for i < len(b) {
			switch c := b[i]; c {
			case '"':
				var ok bool
				if i, ok = skipString(b, i); !ok {
					return i, false
				}
				continue
			case '{':
				open = append(open, '}')
			case '[':
				open = append(open, ']')
			case '}', ']':
				if len(open) == 0 || open[len(open)-1] != c {
					return i, false
				}
				open = open[:len(open)-1]
				if len(open) == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return i, false
	case '}', ']', ',', ':':
		return i, false
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i, i > start
		}
		i++
	}
	return i, i > start
}

// Kind says what a JSON-RPC line is, for a relay that watches a stream
// without serving it.
type Kind int

// The kinds Classify tells apart.
const (
	KindOther Kind = iota
	KindRequest
	KindNotification
	KindResponse
)

// Classify reads one line's envelope: a request (method and id), a
// notification (method only), a response (id only) or anything else. id is
// the id as it is written on the line (a span of line).
func Classify(line []byte) (kind Kind, id []byte, method string) {
	e, ok := scanEnvelope(bytes.TrimSpace(line))
	if !ok {
		return KindOther, nil, ""
	}
	hasID := !isNull(e.id)
	if e.method != nil {
		name, ok := e.methodName()
		if !ok || name == "" {
			return KindOther, nil, ""
		}
		if hasID {
			return KindRequest, e.id, name
		}
		return KindNotification, nil, name
	}
	if hasID {
		return KindResponse, e.id, ""
	}
	return KindOther, nil, ""
}

// Succeeded reports whether a response line carries a result rather than
// an error.
func Succeeded(line []byte) bool {
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	return json.Unmarshal(line, &r) == nil && len(r.Result) > 0 && (len(r.Error) == 0 || isNull(r.Error))
}
