package http

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"unicode/utf8"

	"github.com/berth-sh/berth"
)

// textKey is how an empty text member is marshalled; every answer that
// streams a text has it before any member an agent wrote (error, usage),
// so its first occurrence is the text's.
var textKey = []byte(`"text":""`)

// textPiece is how much of a text is escaped at a time.
const textPiece = 64 << 10

// encodeWithText writes v, whose "text" member is empty, as JSON with text
// in that member, followed by a newline. The text is escaped a piece at a
// time straight to w, so a long one is never held a second time, escaped,
// in memory.
func encodeWithText(w io.Writer, v any, text string) error {
	if text == "" {
		return encodeWith(w, v, nil)
	}
	return encodeWith(w, v, func(w io.Writer) error {
		var piece bytes.Buffer
		penc := json.NewEncoder(&piece)
		penc.SetEscapeHTML(false)
		for text != "" {
			n := min(len(text), textPiece)
			// A piece ends on a rune boundary, so escaping it alone is
			// escaping it in place.
			for n < len(text) && n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
			if n == 0 {
				n = min(len(text), textPiece)
			}
			piece.Reset()
			if err := penc.Encode(text[:n]); err != nil {
				return err
			}
			// Without its quotes and the encoder's newline.
			esc := piece.Bytes()
			if _, err := w.Write(esc[1 : len(esc)-2]); err != nil {
				return err
			}
			text = text[n:]
		}
		return nil
	})
}

// encodeWithLong is encodeWithText for a text read from the log as it is
// written: its pieces, bodies of JSON strings already, go out as they are.
func encodeWithLong(ctx context.Context, w io.Writer, v any, long berth.LongText) error {
	return encodeWith(w, v, func(w io.Writer) error {
		return long(ctx, func(body []byte) error {
			_, err := w.Write(body)
			return err
		})
	})
}

// encodeWith writes v as JSON and a newline, with what text writes (the
// body of a JSON string) in its empty "text" member; text nil leaves it
// empty.
func encodeWith(w io.Writer, v any, text func(io.Writer) error) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	head := buf.Bytes()
	at := bytes.Index(head, textKey)
	if at < 0 || text == nil {
		_, err := w.Write(head)
		return err
	}
	split := at + len(textKey) - 1 // just before the closing quote
	tail := bytes.Clone(head[split:])
	if _, err := w.Write(head[:split]); err != nil {
		return err
	}
	if err := text(w); err != nil {
		return err
	}
	_, err := w.Write(tail)
	return err
}
