package elicitschema

import (
	"encoding/json"
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
