package berth

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// TextBodies is a text as the bodies of the JSON strings it was logged in
// (escaped, without their quotes), in order: an agent's answer of tens of
// MB is kept so and written to a client as it is, never decoded, joined
// and escaped again. Each body is valid JSON string content on its own.
type TextBodies []json.RawMessage

// Len is the bodies' length, escaped.
func (b TextBodies) Len() int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// String decodes the text into one string of about its size: a body
// without escapes is its own text.
func (b TextBodies) String() string {
	var out strings.Builder
	out.Grow(b.Len())
	for _, p := range b {
		if bytes.IndexByte(p, '\\') < 0 {
			out.Write(p)
			continue
		}
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, p...), '"'), &s) == nil {
			out.WriteString(s)
		}
	}
	return out.String()
}

// Head decodes the text's first n bytes at most, cut on a character's
// start, reading only the bodies it needs.
func (b TextBodies) Head(n int) string {
	var out strings.Builder
	for _, p := range b {
		if out.Len() >= n {
			break
		}
		var s string
		if json.Unmarshal(append(append([]byte{'"'}, p...), '"'), &s) != nil {
			continue
		}
		out.WriteString(s)
	}
	s := out.String()
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// IsStringBody reports whether b is valid JSON string content: UTF-8, no
// control character, no bare quote, each escape whole.
func IsStringBody(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"' || c < 0x20:
			return false
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) || !isHex4(b[i+2:i+6]) {
					return false
				}
				i += 5
			default:
				return false
			}
		}
	}
	return utf8.Valid(b)
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
