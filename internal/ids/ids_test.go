package ids

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	id := New("ckpt")
	for _, c := range []struct {
		prefix, id string
		want       bool
	}{
		{"ckpt", id, true},
		{"ckpt", "ckpt_01jq8m3w4x5y6z7a8b9c0d1e2f", true},
		{"snap", id, false},
		{"ckpt", strings.ToUpper(id[:5]) + id[5:], false},
		{"ckpt", "ckpt_01JQ8M3W4X5Y6Z7A8B9C0D1E2F", false},
		{"ckpt", id + "0", false},
		{"ckpt", id[:len(id)-1], false},
		{"ckpt", "ckpt_01jq8m3w4x5y6z7a8b9c0d1e/f", false},
		{"ckpt", "ckpt_01jq8m3w4x5y6z7a8b9c0d1e.f", false},
		{"ckpt", "ckpt01jq8m3w4x5y6z7a8b9c0d1e2f0", false},
		{"ckpt", "", false},
	} {
		if got := Valid(c.prefix, c.id); got != c.want {
			t.Errorf("Valid(%q, %q) = %v, want %v", c.prefix, c.id, got, c.want)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, c := range []struct {
		id   string
		want bool
	}{
		{New("ses"), true},
		{"a", true},
		{"Ses-1.b_2", true},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
		{"", false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"a/b", false},
		{"a\x00b", false},
		{"a b", false},
		{"é", false},
	} {
		if got := ValidName(c.id); got != c.want {
			t.Errorf("ValidName(%q) = %v, want %v", c.id, got, c.want)
		}
	}
}
