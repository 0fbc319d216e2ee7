package http

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

// A text escaped a piece at a time is exactly the text escaped whole, also
// when pieces would split a rune, and for text JSON must escape.
func TestEncodeWithTextMatchesTheEncoder(t *testing.T) {
	long := strings.Repeat("é", textPiece) + "\xff<tag> & \"q\" \\ \u2028\x01" + strings.Repeat("☺x", textPiece)
	for _, text := range []string{"", "plain", "a\"b\\c\n\t\x00", "\xff\xfe", long, strings.Repeat("x", textPiece-1) + "é"} {
		turn := berth.TranscriptTurn{TurnID: "turn_1", Prompt: `"text":""`, Text: text,
			Usage: json.RawMessage(`{"text":""}`), ToolCalls: []berth.TranscriptToolUse{}}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(turn); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		turn.Text = ""
		if err := encodeWithText(&got, turn, text); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("text of %d bytes: got %.120q…, want %.120q…", len(text), got.String(), want.String())
		}
	}
}
