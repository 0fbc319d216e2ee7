package elicitschema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/berth-sh/berth"
)

const form = `{"type":"object","required":["answer"],"properties":{
 "answer":{"type":"string","title":"Answer","minLength":1},
 "email":{"type":"string","format":"email"},
 "when":{"type":"string","format":"date"},
 "n":{"type":"integer","minimum":1,"maximum":5},
 "ok":{"type":"boolean"},
 "color":{"type":"string","enum":["red","green"]},
 "tags":{"type":"array","items":{"type":"string","enum":["a","b"]}},
 "code":{"type":"string","pattern":"^[A-Z]{3}$"},
 "size":{"type":"string","oneOf":[{"const":"s","title":"Small"},{"const":"l","title":"Large"}]}}}`

func TestCheckContent(t *testing.T) {
	f, err := Parse(json.RawMessage(form))
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"answer": "yes", "email": "a@b.example", "when": "2026-11-25", "n": 3, "ok": true,
		"color": "red", "tags": []any{"a"}, "code": "ABC", "size": "l"}
	if err := f.Check(good); err != nil {
		t.Fatalf("good content refused: %v", err)
	}
	for _, c := range []struct {
		content map[string]any
		field   string
	}{
		{map[string]any{}, "answer"},
		{map[string]any{"answer": 7}, "answer"},
		{map[string]any{"answer": ""}, "answer"},
		{map[string]any{"answer": "x", "email": "not an email"}, "email"},
		{map[string]any{"answer": "x", "when": "25/11/2026"}, "when"},
		{map[string]any{"answer": "x", "n": 9}, "n"},
		{map[string]any{"answer": "x", "n": 2.5}, "n"},
		{map[string]any{"answer": "x", "ok": "true"}, "ok"},
		{map[string]any{"answer": "x", "color": "blue"}, "color"},
		{map[string]any{"answer": "x", "tags": []any{"c"}}, "tags"},
		{map[string]any{"answer": "x", "extra": 1}, "extra"},
		{map[string]any{"answer": "x", "code": "abc"}, "code"},
		{map[string]any{"answer": "x", "size": "m"}, "size"},
	} {
		err := f.Check(c.content)
		if !berth.IsCode(err, berth.EInvalid) || !strings.Contains(err.Error(), "content."+c.field+" ") {
			t.Errorf("%v: want EInvalid naming %s, got %v", c.content, c.field, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	big := `{"type":"object","properties":{"a":{"type":"string","description":"` + strings.Repeat("x", berth.MaxElicitationSchemaBytes) + `"}}}`
	var many strings.Builder
	many.WriteString(`{"type":"object","properties":{`)
	for i := range berth.MaxElicitationFields + 1 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"f` + strings.Repeat("x", i) + `":{"type":"string"}`)
	}
	many.WriteString(`}}`)
	for _, c := range []struct{ schema, code string }{
		{big, berth.ETooLarge},
		{many.String(), berth.ETooLarge},
		{`{"type":"array"}`, berth.EInvalid},
		{`{"type":"object","properties":{"a":{"type":"object"}}}`, berth.EInvalid},
		{`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1/x"}}}`, berth.EInvalid},
		{`{"type":"object","properties":{"a":{"type":"string","format":"ipv4"}}}`, berth.EInvalid},
		{`{"type":"object","properties":{},"required":["nope"]}`, berth.EInvalid},
		{`[1]`, berth.EInvalid},
	} {
		if _, err := Parse(json.RawMessage(c.schema)); !berth.IsCode(err, c.code) {
			t.Errorf("%.80s: want %s, got %v", c.schema, c.code, err)
		}
	}
}

// TestPlainWords pins what Check says of a value out of its field's type
// or bounds: each field type's words.
func TestPlainWords(t *testing.T) {
	f, err := Parse(json.RawMessage(`{"type":"object","properties":{
 "s":{"type":"string","minLength":2,"maxLength":3},
 "n":{"type":"number","minimum":1.5,"maximum":2.5},
 "i":{"type":"integer"},
 "ok":{"type":"boolean"},
 "a":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"string","enum":["x","y"]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		content map[string]any
		want    string
	}{
		{map[string]any{"s": 1}, "content.s must be a string"},
		{map[string]any{"s": "a"}, "content.s must be at least 2 characters"},
		{map[string]any{"s": "abcd"}, "content.s must be at most 3 characters"},
		{map[string]any{"n": "1"}, "content.n must be a number"},
		{map[string]any{"n": 1}, "content.n must be at least 1.5"},
		{map[string]any{"n": 3}, "content.n must be at most 2.5"},
		{map[string]any{"i": 1.5}, "content.i must be an integer"},
		{map[string]any{"ok": "yes"}, "content.ok must be true or false"},
		{map[string]any{"a": "x"}, "content.a must be a list of strings"},
		{map[string]any{"a": []any{1}}, "content.a must be a list of strings"},
		{map[string]any{"a": []any{"z"}}, `content.a holds "z"; each must be one of x, y`},
		{map[string]any{"a": []any{}}, "content.a must hold at least 1"},
		{map[string]any{"a": []any{"x", "y", "x"}}, "content.a must hold at most 2"},
	} {
		var e *berth.Error
		if err := f.Check(c.content); !errors.As(err, &e) || e.Message != c.want {
			t.Errorf("%v: got %v, want %q", c.content, err, c.want)
		}
	}
	if err := f.Check(map[string]any{"s": "héé", "n": 2, "i": 4, "ok": false, "a": []any{"y"}}); err != nil {
		t.Errorf("content within the bounds refused: %v", err)
	}
}
