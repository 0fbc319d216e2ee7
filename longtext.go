package berth

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// LongText is a turn's text too long to hold in memory whole (see
// TurnResult, TranscriptTurn): it is read again from the log when it is
// written, each piece as the body of a JSON string (escaped, without its
// quotes), in order. each's error ends the read.
type LongText func(ctx context.Context, each func(body []byte) error) error

// String decodes the whole text.
func (t LongText) String(ctx context.Context) (string, error) {
	var out strings.Builder
	err := t(ctx, func(body []byte) error {
		out.WriteString(DecodeStringBody(body))
		return nil
	})
	return out.String(), err
}

// errHeadFull ends a Head read.
var errHeadFull = &Error{Code: EInternal, Message: "head read"}

// Head decodes the text's first n bytes at most, cut on a character's
// start, reading only the pieces it needs.
func (t LongText) Head(ctx context.Context, n int) (string, error) {
	var out strings.Builder
	err := t(ctx, func(body []byte) error {
		out.WriteString(DecodeStringBody(body))
		if out.Len() >= n {
			return errHeadFull
		}
		return nil
	})
	if err == errHeadFull {
		err = nil
	}
	s := out.String()
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s, err
}

// DecodeStringBody decodes the body of a JSON string (IsStringBody): one
// without escapes is its own text; a body that is not one decodes to "".
func DecodeStringBody(body []byte) string {
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body)
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, body...), '"'), &s) != nil {
		return ""
	}
	return s
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
