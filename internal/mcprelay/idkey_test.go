package mcprelay

import "testing"

// A request id is one id however it is spelled, as the MCP SDK answers
// it: numbers by their integer part, strings by text; a number and a
// string of the same digits are two.
func TestIDKey(t *testing.T) {
	same := [][]string{{`1`, `1.0`, ` 1 `, `1e0`, `1.5`}, {`"a"`, `"\u0061"`}, {`0`, `-0`}}
	for _, group := range same {
		for _, id := range group[1:] {
			if idKey([]byte(id)) != idKey([]byte(group[0])) {
				t.Errorf("%s and %s are not one id", id, group[0])
			}
		}
	}
	if idKey([]byte(`1`)) == idKey([]byte(`"1"`)) {
		t.Error("1 and \"1\" are one id")
	}
}
