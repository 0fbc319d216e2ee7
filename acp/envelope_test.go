package acp

import (
	"bytes"
	"encoding/json"
	"testing"
)

// decodeWithStdlib is what encoding/json makes of a line, for comparison.
func decodeWithStdlib(line []byte) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

func TestScanEnvelopeAgreesWithEncodingJSON(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"a":[1,2,{"b":"}"}]}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"x":"with \"quotes\" and \\ backslash"}}`,
		` { "id" : "a-1" , "method" : "fs/read_text_file" , "params" : [ ] } `,
		`{"id":null,"method":"m"}`,
		`{"\u0069d":7,"method":"\u006d"}`,
		`{"id":1,"error":{"code":-32000,"message":"x"},"id":2}`,
		`{}`,
	} {
		e, ok := scanEnvelope([]byte(line))
		m, want := decodeWithStdlib([]byte(line))
		if ok != want {
			t.Fatalf("%s: scan ok=%v, encoding/json ok=%v", line, ok, want)
		}
		compareEnvelope(t, []byte(line), e, m)
	}
	for _, bad := range []string{`{`, `{"id":1`, `{"id":}`, `{"id" 1}`, `{"id":1,}`, `[1]`, `{"id":1} x`, `{"a":"unterminated}`, `{"a":[1,2}`, `{"id":3,"result":{]}`, `{"a":[}]}`} {
		if _, ok := scanEnvelope([]byte(bad)); ok {
			t.Errorf("%s: scanned as an object", bad)
		}
	}
}

// compareEnvelope checks that every member the scanner found is, as JSON,
// what encoding/json found.
func compareEnvelope(t *testing.T, line []byte, e envelope, m map[string]json.RawMessage) {
	t.Helper()
	for key, got := range map[string][]byte{"id": e.id, "method": e.method, "params": e.params, "result": e.result, "error": e.err} {
		want, present := m[key]
		if present != (got != nil) {
			t.Fatalf("%s: member %s present=%v, scanner found %q", line, key, present, got)
		}
		if present && !bytes.Equal(compact(want), compact(got)) {
			t.Fatalf("%s: member %s = %q, encoding/json has %q", line, key, got, want)
		}
	}
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// FuzzScanEnvelope: on every valid JSON object the scanner must agree with
// encoding/json; on anything else it must not panic.
func FuzzScanEnvelope(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"b"}}`))
	f.Add([]byte(`{"id":"s","result":[1,{"x":"]"}]}`))
	f.Add([]byte(`{"method":"\u006dx","params":"\\\""}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, ok := scanEnvelope(line)
		m, valid := decodeWithStdlib(line)
		if !valid {
			return
		}
		if !ok {
			t.Fatalf("valid object %q not scanned", line)
		}
		compareEnvelope(t, line, e, m)
	})
}
