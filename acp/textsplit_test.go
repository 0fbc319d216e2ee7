package acp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkSplit cuts the literal of text at max and checks the pieces: each
// at most max (but for a unit longer than it), each a valid literal body
// on its own, together the text again.
func checkSplit(t *testing.T, text string, max int) [][]byte {
	t.Helper()
	lit, err := json.Marshal(text)
	if err != nil {
		t.Fatal(err)
	}
	body := lit[1 : len(lit)-1]
	parts := SplitStringBody(body, max)
	var joined strings.Builder
	for i, p := range parts {
		if len(p) > max && len(p) > 12 {
			t.Fatalf("piece %d is %d bytes, over %d", i, len(p), max)
		}
		var s string
		if err := json.Unmarshal(append(append([]byte{'"'}, p...), '"'), &s); err != nil {
			t.Fatalf("piece %d %q is not a literal body: %v", i, p, err)
		}
		if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) && !strings.ContainsRune(text, utf8.RuneError) {
			t.Fatalf("piece %d %q cuts a character", i, p)
		}
		joined.WriteString(s)
	}
	if joined.String() != text {
		t.Fatalf("the pieces make %q, want %q", joined.String(), text)
	}
	if !bytes.Equal(bytes.Join(parts, nil), body) {
		t.Fatal("the pieces are not the literal, in order")
	}
	return parts
}

// A long text chunk is logged in pieces that never cut an escape, a
// surrogate pair or a UTF-8 character.
func TestSplitStringBody(t *testing.T) {
	checkSplit(t, "", 16)
	checkSplit(t, "short", 16)
	if parts := checkSplit(t, strings.Repeat("abcdefgh", 10), 16); len(parts) != 5 {
		t.Errorf("80 ASCII bytes at 16: %d pieces, want 5", len(parts))
	}
	checkSplit(t, strings.Repeat("é", 40), 15)
	checkSplit(t, strings.Repeat("line\n\t\"quoted\"\\", 20), 13)
	// Go writes U+2028 as \u2028; an emoji written by an agent as a
	// surrogate pair of escapes must stay together.
	checkSplit(t, strings.Repeat("a\u2028b", 30), 13)
	pair := []byte(strings.Repeat(`x\ud83d\ude00`, 20))
	parts := SplitStringBody(pair, 14)
	for i, p := range parts {
		var s string
		if err := json.Unmarshal(append(append([]byte{'"'}, p...), '"'), &s); err != nil || strings.ContainsRune(s, utf8.RuneError) {
			t.Fatalf("piece %d %q splits a surrogate pair (%q, %v)", i, p, s, err)
		}
	}
	if !bytes.Equal(bytes.Join(parts, nil), pair) {
		t.Fatal("surrogate pairs: the pieces are not the literal")
	}
}

func FuzzSplitStringBody(f *testing.F) {
	f.Add("hello\nworld \u2028 😀 é", 13)
	f.Add(strings.Repeat("\\", 40), 12)
	f.Fuzz(func(t *testing.T, text string, max int) {
		if max < 12 || max > 1<<16 || !utf8.ValidString(text) {
			return
		}
		checkSplit(t, text, max)
	})
}

// A text chunk line over the cap becomes lines of the same update, each a
// piece of its text; anything else is left as it is.
func TestSplitTextChunk(t *testing.T) {
	text := strings.Repeat("é and \"quotes\"\n", 40000) // ~600 KB escaped
	lit, _ := json.Marshal(text)
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-1","update":{"sessionUpdate":"agent_thought_chunk","messageId":"m","content":{"type":"text","text":` + string(lit) + `}}}}`)
	lines, ok := SplitTextChunk(line, 100000)
	if !ok || len(lines) < 6 {
		t.Fatalf("split into %d lines (%v)", len(lines), ok)
	}
	var got strings.Builder
	for i, l := range lines {
		if l[len(l)-1] != '\n' || len(l) > 100000+200 {
			t.Fatalf("line %d: %d bytes, newline %v", i, len(l), l[len(l)-1] == '\n')
		}
		var n struct {
			Method string `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Update    struct {
					Kind    string `json:"sessionUpdate"`
					Content struct {
						Type, Text string
					} `json:"content"`
				} `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal(l, &n); err != nil {
			t.Fatalf("line %d is not JSON: %v", i, err)
		}
		if n.Method != MethodSessionUpdate || n.Params.SessionID != "s-1" || n.Params.Update.Kind != "agent_thought_chunk" || n.Params.Update.Content.Type != "text" {
			t.Fatalf("line %d: %+v", i, n)
		}
		got.WriteString(n.Params.Update.Content.Text)
	}
	if got.String() != text {
		t.Fatal("the pieces do not make the text")
	}
	for _, other := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"short"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","content":[{"type":"content","content":{"type":"text","text":"` + strings.Repeat("x", 200000) + `"}}]}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + strings.Repeat("x", 200000) + `"}}}}`,
		`not json ` + strings.Repeat("x", 200000),
	} {
		if lines, ok := SplitTextChunk([]byte(other), 100000); ok {
			t.Errorf("split %.80s… into %d lines", other, len(lines))
		}
	}
}
