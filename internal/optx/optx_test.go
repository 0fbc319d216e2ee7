package optx

import (
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	for _, c := range []struct{ v, want int }{{0, 7}, {-3, 7}, {1, 1}, {9, 9}} {
		v := c.v
		Default(&v, 7)
		if v != c.want {
			t.Errorf("Default(%d, 7) = %d, want %d", c.v, v, c.want)
		}
	}
	d := time.Duration(0)
	Default(&d, time.Second)
	if d != time.Second {
		t.Errorf("a zero duration became %s", d)
	}
}
